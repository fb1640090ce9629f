package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	sigsjson "sigs.k8s.io/json"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// v1alpha1 is a spoke: it converts to and from the hub, v1. Every v1alpha1
// field has a v1 counterpart; v1 has many more. A v1 object read as v1alpha1
// carries the v1 spec and status it came from in the annotations
// mlv1.AnnotationV1Spec and mlv1.AnnotationV1Status, so writing it back (with
// or without edits to the v1alpha1 fields) loses nothing. The annotations are
// only added when the v1alpha1 fields alone cannot rebuild the v1 object, and
// they never appear on the v1 form.

// DefaultDataVolumeMountPath is where v1alpha1 mounts dataVolume; v1 makes it
// configurable (dataVolume.mountPath) with the same default.
const DefaultDataVolumeMountPath = "/data"

var _ conversion.Convertible = &TrainingJob{}

// ConvertTo converts this v1alpha1 TrainingJob to the hub version, v1.
func (src *TrainingJob) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*mlv1.TrainingJob)
	if !ok {
		return fmt.Errorf("converting v1alpha1 TrainingJob to %T: only *v1.TrainingJob is a hub", dstRaw)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	storedSpec := popStored[mlv1.TrainingJobSpec](&dst.Annotations, mlv1.AnnotationV1Spec)
	storedStatus := popStored[mlv1.TrainingJobStatus](&dst.Annotations, mlv1.AnnotationV1Status)
	dst.Spec = specToV1(&src.Spec, storedSpec)
	dst.Status = statusToV1(&src.Status, storedStatus)
	return nil
}

// ConvertFrom converts the hub version, v1, to this v1alpha1 TrainingJob.
func (dst *TrainingJob) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*mlv1.TrainingJob)
	if !ok {
		return fmt.Errorf("converting %T to a v1alpha1 TrainingJob: only *v1.TrainingJob is a hub", srcRaw)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec = specFromV1(&src.Spec)
	dst.Status = statusFromV1(&src.Status)

	// Keep what the v1alpha1 fields cannot carry, and only then.
	if rebuilt := specToV1(&dst.Spec, nil); !equality.Semantic.DeepEqual(rebuilt, src.Spec) {
		if err := putStored(&dst.Annotations, mlv1.AnnotationV1Spec, src.Spec); err != nil {
			return err
		}
	}
	if rebuilt := statusToV1(&dst.Status, nil); !equality.Semantic.DeepEqual(rebuilt, src.Status) {
		if err := putStored(&dst.Annotations, mlv1.AnnotationV1Status, src.Status); err != nil {
			return err
		}
	}
	return nil
}

// PhaseForState is the v1alpha1 phase that shows a v1 state. The mapping
// itself is mlv1.TrainingJobState.V1Alpha1Phase (Completed is Succeeded, a
// job setting up or suspended is Pending, a restarting gang is Running); a job
// without a state yet has no phase either, so that the round trip is exact.
func PhaseForState(s mlv1.TrainingJobState) TrainingJobPhase {
	if s == "" {
		return ""
	}
	return TrainingJobPhase(s.V1Alpha1Phase())
}

// StateForPhase is the v1 state of a v1alpha1 phase, the inverse of
// PhaseForState: Succeeded is Completed, the others are spelt the same.
func StateForPhase(p TrainingJobPhase) mlv1.TrainingJobState {
	if p == PhaseSucceeded {
		return mlv1.StateCompleted
	}
	return mlv1.TrainingJobState(p)
}

// specToV1 builds the v1 spec from the v1alpha1 fields. stored is the v1 spec
// kept in the annotation, if any: its v1-only fields are restored, and so is
// each mapped field whose v1alpha1 value is still what stored would show
// (so that, for example, an unset gpusPerWorker stays unset). The fields
// v1alpha1 names differently are copied through the rename table
// (renames.go).
func specToV1(in *TrainingJobSpec, stored *mlv1.TrainingJobSpec) mlv1.TrainingJobSpec {
	out := mlv1.TrainingJobSpec{}
	if stored != nil {
		stored.DeepCopyInto(&out)
	}
	out.Framework = mlv1.Framework(in.Framework)
	out.Image = in.Image
	out.Command = slices.Clone(in.Command)
	out.Args = slices.Clone(in.Args)
	for _, f := range renamedSpecFields {
		f.toV1(in, &out, stored)
	}
	out.Resources = *in.Resources.DeepCopy()
	if stored == nil || !equality.Semantic.DeepEqual(dataVolumeFromV1(stored.DataVolume), in.DataVolume) {
		out.DataVolume = dataVolumeToV1(in.DataVolume)
	}
	out.Hyperparameters = copyHyperparameters(in.Hyperparameters)
	out.RestartPolicy = mlv1.RestartPolicy(in.RestartPolicy)
	return out
}

// specFromV1 is the v1alpha1 view of a v1 spec.
func specFromV1(in *mlv1.TrainingJobSpec) TrainingJobSpec {
	out := TrainingJobSpec{
		Framework:       string(in.Framework),
		Image:           in.Image,
		Command:         slices.Clone(in.Command),
		Args:            slices.Clone(in.Args),
		Resources:       *in.Resources.DeepCopy(),
		DataVolume:      dataVolumeFromV1(in.DataVolume),
		Hyperparameters: copyHyperparameters(in.Hyperparameters),
		RestartPolicy:   string(in.RestartPolicy),
	}
	for _, f := range renamedSpecFields {
		f.fromV1(in, &out)
	}
	return out
}

func dataVolumeToV1(in *corev1.PersistentVolumeClaimVolumeSource) *mlv1.DataVolumeSpec {
	if in == nil {
		return nil
	}
	return &mlv1.DataVolumeSpec{ClaimName: in.ClaimName, ReadOnly: in.ReadOnly, MountPath: DefaultDataVolumeMountPath}
}

func dataVolumeFromV1(in *mlv1.DataVolumeSpec) *corev1.PersistentVolumeClaimVolumeSource {
	if in == nil {
		return nil
	}
	return &corev1.PersistentVolumeClaimVolumeSource{ClaimName: in.ClaimName, ReadOnly: in.ReadOnly}
}

func copyHyperparameters(in map[string]mlv1.HyperparameterValue) map[string]mlv1.HyperparameterValue {
	if in == nil {
		return nil
	}
	out := make(map[string]mlv1.HyperparameterValue, len(in))
	for k, v := range in {
		out[k] = *v.DeepCopy()
	}
	return out
}

// statusToV1 builds the v1 status from the v1alpha1 fields, restoring from
// stored like specToV1.
func statusToV1(in *TrainingJobStatus, stored *mlv1.TrainingJobStatus) mlv1.TrainingJobStatus {
	out := mlv1.TrainingJobStatus{}
	if stored != nil {
		stored.DeepCopyInto(&out)
	}
	if stored == nil || PhaseForState(stored.State) != in.Phase {
		out.State = StateForPhase(in.Phase)
	}
	out.StartTime = in.StartTime.DeepCopy()
	out.CompletionTime = in.CompletionTime.DeepCopy()
	if stored == nil || !equality.Semantic.DeepEqual(workerStatusesFromV1(stored.WorkerStatuses), in.WorkerStatuses) {
		out.WorkerStatuses = workerStatusesToV1(in.WorkerStatuses)
	}
	out.Conditions = copyConditions(in.Conditions)
	out.ObservedGeneration = in.ObservedGeneration
	return out
}

// statusFromV1 is the v1alpha1 view of a v1 status.
func statusFromV1(in *mlv1.TrainingJobStatus) TrainingJobStatus {
	return TrainingJobStatus{
		Phase:              PhaseForState(in.State),
		StartTime:          in.StartTime.DeepCopy(),
		CompletionTime:     in.CompletionTime.DeepCopy(),
		WorkerStatuses:     workerStatusesFromV1(in.WorkerStatuses),
		Conditions:         copyConditions(in.Conditions),
		ObservedGeneration: in.ObservedGeneration,
	}
}

func workerStatusesToV1(in []WorkerStatus) []mlv1.WorkerStatus {
	if in == nil {
		return nil
	}
	out := make([]mlv1.WorkerStatus, len(in))
	for i, w := range in {
		out[i] = mlv1.WorkerStatus{Rank: w.WorkerID, PodName: w.PodName, Phase: w.Phase, RestartCount: w.RestartCount}
	}
	return out
}

func workerStatusesFromV1(in []mlv1.WorkerStatus) []WorkerStatus {
	if in == nil {
		return nil
	}
	out := make([]WorkerStatus, len(in))
	for i, w := range in {
		out[i] = WorkerStatus{WorkerID: w.Rank, PodName: w.PodName, Phase: w.Phase, RestartCount: w.RestartCount}
	}
	return out
}

func copyConditions[T any](in []T) []T {
	if in == nil {
		return nil
	}
	return slices.Clone(in)
}

// popStored reads and removes the JSON kept under key. A missing or
// unreadable annotation is treated as absent: the object converts from its
// v1alpha1 fields alone rather than becoming unreadable.
func popStored[T any](annotations *map[string]string, key string) *T {
	raw, ok := (*annotations)[key]
	if !ok {
		return nil
	}
	delete(*annotations, key)
	if len(*annotations) == 0 {
		*annotations = nil
	}
	out := new(T)
	if err := json.Unmarshal([]byte(raw), out); err != nil {
		return nil
	}
	return out
}

// putStored keeps v as JSON under key.
func putStored(annotations *map[string]string, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("keeping the v1 form in annotation %s: %w", key, err)
	}
	if *annotations == nil {
		*annotations = map[string]string{}
	}
	(*annotations)[key] = string(raw)
	return nil
}

// UnmarshalJSON decodes a v1alpha1 TrainingJob as the API machinery does
// (case-sensitive field names, whole numbers kept as integers), and words a
// value of the wrong JSON type in the API server's terms, naming the field
// path and the type the schema wants: `spec.workers: Invalid value:
// "string": spec.workers in body must be of type integer`.
//
// The conversion webhook decodes every v1alpha1 object before ConvertTo,
// and the API server sends a v1alpha1 request to it (to reach the v1
// admission webhooks) before its own schema check, so this is the text a
// user sees for such a manifest, wrapped by the API server as an internal
// error (500; see docs/admission.md).
func (in *TrainingJob) UnmarshalJSON(data []byte) error {
	type plain TrainingJob // without this method
	err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, (*plain)(in))
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return fmt.Errorf("%s: Invalid value: %q: %s in body must be of type %s",
			typeErr.Field, typeErr.Value, typeErr.Field, openAPIType(typeErr.Type))
	}
	return err
}

// openAPIType is the OpenAPI name of the JSON type a Go type decodes from.
func openAPIType(t reflect.Type) string {
	if t == nil {
		return "unknown"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Bool:
		return "boolean"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	default:
		return "object"
	}
}
