package v1alpha1

import (
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// FieldRename is a spec field that v1alpha1 names differently from v1.
// +kubebuilder:object:generate=false
type FieldRename struct {
	// V1 is the field's path in v1, for example spec.numWorkers.
	V1 string
	// V1Alpha1 is its path in v1alpha1, for example spec.workers.
	V1Alpha1 string
}

// renamedSpecField is a renamed field with how the conversion carries it
// each way.
type renamedSpecField struct {
	FieldRename
	// toV1 sets the field of out from in. stored is the v1 spec kept in the
	// annotation (nil if none): see specToV1.
	toV1 func(in *TrainingJobSpec, out, stored *mlv1.TrainingJobSpec)
	// fromV1 sets the field of out from in.
	fromV1 func(in *mlv1.TrainingJobSpec, out *TrainingJobSpec)
}

// renamedSpecFields is the rename table: the conversion copies these fields
// through it, and SpecFieldRenames exports their paths.
var renamedSpecFields = []renamedSpecField{
	{
		FieldRename: FieldRename{V1: "spec.numWorkers", V1Alpha1: "spec.workers"},
		toV1:        func(in *TrainingJobSpec, out, _ *mlv1.TrainingJobSpec) { out.NumWorkers = in.Workers },
		fromV1:      func(in *mlv1.TrainingJobSpec, out *TrainingJobSpec) { out.Workers = in.NumWorkers },
	},
	{
		FieldRename: FieldRename{V1: "spec.gpusPerWorker", V1Alpha1: "spec.gpuPerWorker"},
		toV1: func(in *TrainingJobSpec, out, stored *mlv1.TrainingJobSpec) {
			// An unset v1 gpusPerWorker stays unset while v1alpha1 shows its default.
			if stored == nil || gpusFromV1(stored) != in.GPUPerWorker {
				out.GPUsPerWorker = ptr.To(in.GPUPerWorker)
			}
		},
		fromV1: func(in *mlv1.TrainingJobSpec, out *TrainingJobSpec) { out.GPUPerWorker = gpusFromV1(in) },
	},
	{
		FieldRename: FieldRename{V1: "spec.checkpoint.path", V1Alpha1: "spec.checkpointDir"},
		toV1:        func(in *TrainingJobSpec, out, _ *mlv1.TrainingJobSpec) { out.Checkpoint.Path = in.CheckpointDir },
		fromV1:      func(in *mlv1.TrainingJobSpec, out *TrainingJobSpec) { out.CheckpointDir = in.Checkpoint.Path },
	},
	{
		FieldRename: FieldRename{V1: "spec.checkpoint.frequency", V1Alpha1: "spec.checkpointInterval"},
		toV1: func(in *TrainingJobSpec, out, _ *mlv1.TrainingJobSpec) {
			out.Checkpoint.Frequency = in.CheckpointInterval
		},
		fromV1: func(in *mlv1.TrainingJobSpec, out *TrainingJobSpec) { out.CheckpointInterval = in.Checkpoint.Frequency },
	},
}

// SpecFieldRenames are the spec fields v1alpha1 names differently from v1,
// as the conversion maps them. Every other spec field a v1alpha1 object can
// set has the same path in both versions. The admission webhooks, which see
// every request as v1, use it to name the fields of a refused v1alpha1
// request as its author wrote them.
func SpecFieldRenames() []FieldRename {
	out := make([]FieldRename, len(renamedSpecFields))
	for i, f := range renamedSpecFields {
		out[i] = f.FieldRename
	}
	return out
}

// gpusFromV1 shows v1's gpusPerWorker, whose unset value means 1, as
// v1alpha1's plain number.
func gpusFromV1(in *mlv1.TrainingJobSpec) int32 { return in.EffectiveGPUs() }
