package v1alpha1_test

import (
	"encoding/json"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mlv1alpha1 "github.com/ml-operator/ml-operator/api/v1alpha1"
)

// roundTrips is how many random objects each direction converts.
const roundTrips = 5000

// fuzzFuncs keep the random objects inside what the API server can hold:
// scalar hyperparameters, enum values for the state and phase, and no user
// annotation under the keys conversion reserves for itself.
func fuzzFuncs(_ serializer.CodecFactory) []any {
	states := []mlv1.TrainingJobState{"", mlv1.StatePending, mlv1.StateInitializing, mlv1.StateRunning,
		mlv1.StateRestarting, mlv1.StateSuspended, mlv1.StateCompleted, mlv1.StateFailed}
	phases := []mlv1alpha1.TrainingJobPhase{"", mlv1alpha1.PhasePending, mlv1alpha1.PhaseRunning,
		mlv1alpha1.PhaseSucceeded, mlv1alpha1.PhaseFailed}
	return []any{
		func(h *mlv1.HyperparameterValue, c randfill.Continue) {
			switch c.Intn(4) {
			case 0:
				*h = mlv1.NewHyperparameter(c.String(8))
			case 1:
				*h = mlv1.NewHyperparameter(c.Bool())
			case 2:
				*h = mlv1.NewHyperparameter(c.Int63n(1 << 40))
			default:
				*h = mlv1.HyperparameterValue{Raw: []byte("0.001")}
			}
		},
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(100000), resource.DecimalSI)
		},
		func(s *mlv1.TrainingJobState, c randfill.Continue) { *s = states[c.Intn(len(states))] },
		func(p *mlv1alpha1.TrainingJobPhase, c randfill.Continue) { *p = phases[c.Intn(len(phases))] },
		func(m *metav1.ObjectMeta, c randfill.Continue) {
			c.FillNoCustom(m)
			m.CreationTimestamp = metav1.Unix(c.Int63n(1<<32), 0)
			m.DeletionTimestamp = nil
			m.ManagedFields = nil
			delete(m.Annotations, mlv1.AnnotationV1Spec)
			delete(m.Annotations, mlv1.AnnotationV1Status)
		},
		func(t *metav1.Time, c randfill.Continue) { *t = metav1.Unix(c.Int63n(1<<32), 0) },
	}
}

func newFiller(seed int64) *randfill.Filler {
	return fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, fuzzFuncs), rand.NewSource(seed),
		serializer.NewCodecFactory(runtime.NewScheme()))
}

// throughJSON serialises obj and reads it back, the way the API server hands
// objects between the conversion webhook and etcd.
func throughJSON[T any](t *testing.T, obj *T) *T {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	out := new(T)
	require.NoError(t, json.Unmarshal(raw, out))
	return out
}

// viaSpoke converts a v1 object to v1alpha1, through JSON, and back to v1,
// as the API server does when a v1alpha1 client reads and writes a stored
// v1 object. in is not changed.
func viaSpoke(t *testing.T, in *mlv1.TrainingJob) *mlv1.TrainingJob {
	t.Helper()
	spoke := &mlv1alpha1.TrainingJob{}
	require.NoError(t, spoke.ConvertFrom(in.DeepCopy()), "v1 -> v1alpha1")
	spoke = throughJSON(t, spoke)
	out := &mlv1.TrainingJob{}
	require.NoError(t, spoke.ConvertTo(out), "v1alpha1 -> v1")
	return out
}

// viaHub converts a v1alpha1 object to v1 (the stored version), through
// JSON, and back to v1alpha1. in is not changed.
func viaHub(t *testing.T, in *mlv1alpha1.TrainingJob) *mlv1alpha1.TrainingJob {
	t.Helper()
	hub := &mlv1.TrainingJob{}
	require.NoError(t, in.DeepCopy().ConvertTo(hub), "v1alpha1 -> v1")
	hub = throughJSON(t, hub)
	out := &mlv1alpha1.TrainingJob{}
	require.NoError(t, out.ConvertFrom(hub), "v1 -> v1alpha1")
	return out
}

// Every random v1 object survives v1 -> v1alpha1 -> v1 unchanged.
func TestHubRoundTripIsLossless(t *testing.T) {
	f := newFiller(1)
	for i := range roundTrips {
		in := &mlv1.TrainingJob{}
		f.Fill(in)
		if out := viaSpoke(t, in); !equality.Semantic.DeepEqual(in, out) {
			t.Fatalf("object %d changed in a v1 -> v1alpha1 -> v1 round trip (-in +out):\n%s", i, cmp.Diff(in, out))
		}
	}
}

// Every random v1alpha1 object survives v1alpha1 -> v1 -> v1alpha1 unchanged,
// without gaining annotations.
func TestSpokeRoundTripIsLossless(t *testing.T) {
	f := newFiller(2)
	for i := range roundTrips {
		in := &mlv1alpha1.TrainingJob{}
		f.Fill(in)
		if out := viaHub(t, in); !equality.Semantic.DeepEqual(in, out) {
			t.Fatalf("object %d changed in a v1alpha1 -> v1 -> v1alpha1 round trip (-in +out):\n%s", i, cmp.Diff(in, out))
		}
	}
}

// A v1alpha1 edit to a converted v1 object wins over the stored v1 form, and
// the v1-only fields stay.
func TestSpokeEditsWinOverStoredForm(t *testing.T) {
	in := &mlv1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: "j"},
		Spec: mlv1.TrainingJobSpec{
			Framework:     mlv1.FrameworkPyTorch,
			NumWorkers:    2,
			NProcPerNode:  ptr.To[int32](4),
			DataVolume:    &mlv1.DataVolumeSpec{ClaimName: "data", MountPath: "/datasets"},
			Checkpoint:    mlv1.CheckpointSpec{Path: "/ckpt", Frequency: 2, KeepLast: 5},
			Suspend:       ptr.To(true),
			GPUsPerWorker: nil,
		},
		Status: mlv1.TrainingJobStatus{State: mlv1.StateRestarting, Restarts: 2,
			WorkerStatuses: []mlv1.WorkerStatus{{Rank: 0, PodName: "j-worker-0", Node: "n1"}}},
	}
	spoke := &mlv1alpha1.TrainingJob{}
	require.NoError(t, spoke.ConvertFrom(in))
	assert.Equal(t, int32(1), spoke.Spec.GPUPerWorker, "an unset gpusPerWorker means 1 GPU")
	assert.Equal(t, mlv1alpha1.PhaseRunning, spoke.Status.Phase, "a restarting job shows as Running")
	assert.Equal(t, &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}, spoke.Spec.DataVolume)
	require.Contains(t, spoke.Annotations, mlv1.AnnotationV1Spec)
	require.Contains(t, spoke.Annotations, mlv1.AnnotationV1Status)

	spoke.Spec.Workers = 8
	spoke.Spec.GPUPerWorker = 2
	spoke.Spec.DataVolume.ClaimName = "other"
	spoke.Status.Phase = mlv1alpha1.PhaseFailed
	out := &mlv1.TrainingJob{}
	require.NoError(t, spoke.ConvertTo(out))
	assert.Equal(t, int32(8), out.Spec.NumWorkers)
	assert.Equal(t, ptr.To[int32](2), out.Spec.GPUsPerWorker)
	assert.Equal(t, &mlv1.DataVolumeSpec{ClaimName: "other", MountPath: mlv1alpha1.DefaultDataVolumeMountPath}, out.Spec.DataVolume,
		"a changed dataVolume is mounted where v1alpha1 mounts it")
	assert.Equal(t, ptr.To[int32](4), out.Spec.NProcPerNode, "v1-only fields survive")
	assert.Equal(t, int32(5), out.Spec.Checkpoint.KeepLast)
	assert.Equal(t, mlv1.StateFailed, out.Status.State)
	assert.Equal(t, int32(2), out.Status.Restarts)
	assert.Equal(t, "n1", out.Status.WorkerStatuses[0].Node)
	assert.NotContains(t, out.Annotations, mlv1.AnnotationV1Spec, "the stored form never shows on v1")
	assert.NotContains(t, out.Annotations, mlv1.AnnotationV1Status)
}

// A v1 object that v1alpha1 can show completely carries no annotation.
func TestSimpleObjectsCarryNoAnnotation(t *testing.T) {
	in := &mlv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: "simple"},
		Spec: mlv1alpha1.TrainingJobSpec{Framework: "pytorch", Image: "img", Command: []string{"python"},
			Workers: 2, DataVolume: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "d"}},
		Status: mlv1alpha1.TrainingJobStatus{Phase: mlv1alpha1.PhaseSucceeded},
	}
	hub := &mlv1.TrainingJob{}
	require.NoError(t, in.ConvertTo(hub))
	assert.Equal(t, mlv1.StateCompleted, hub.Status.State)
	assert.Equal(t, "/data", hub.Spec.DataVolume.MountPath)
	out := &mlv1alpha1.TrainingJob{}
	require.NoError(t, out.ConvertFrom(hub))
	assert.Empty(t, out.Annotations)
}

func TestStatePhaseMapping(t *testing.T) {
	for state, phase := range map[mlv1.TrainingJobState]mlv1alpha1.TrainingJobPhase{
		mlv1.StatePending:      mlv1alpha1.PhasePending,
		mlv1.StateInitializing: mlv1alpha1.PhasePending,
		mlv1.StateSuspended:    mlv1alpha1.PhasePending,
		mlv1.StateRunning:      mlv1alpha1.PhaseRunning,
		mlv1.StateRestarting:   mlv1alpha1.PhaseRunning,
		mlv1.StateCompleted:    mlv1alpha1.PhaseSucceeded,
		mlv1.StateFailed:       mlv1alpha1.PhaseFailed,
	} {
		assert.Equal(t, phase, mlv1alpha1.PhaseForState(state), "phase for %s", state)
	}
	for phase, state := range map[mlv1alpha1.TrainingJobPhase]mlv1.TrainingJobState{
		mlv1alpha1.PhasePending:   mlv1.StatePending,
		mlv1alpha1.PhaseRunning:   mlv1.StateRunning,
		mlv1alpha1.PhaseSucceeded: mlv1.StateCompleted,
		mlv1alpha1.PhaseFailed:    mlv1.StateFailed,
	} {
		assert.Equal(t, state, mlv1alpha1.StateForPhase(phase), "state for %s", phase)
	}
}

// A value of the wrong JSON type is refused with the field path and the
// type the schema wants, as the API server words it; a well-typed object
// decodes as before, with case-sensitive field names.
func TestUnmarshalNamesWrongTypedField(t *testing.T) {
	var job mlv1alpha1.TrainingJob
	err := json.Unmarshal([]byte(`{"apiVersion":"ml.example.com/v1alpha1","kind":"TrainingJob","spec":{"workers":"2"}}`), &job)
	require.EqualError(t, err, `spec.workers: Invalid value: "string": spec.workers in body must be of type integer`)

	err = json.Unmarshal([]byte(`{"spec":{"command":"python"}}`), &job)
	require.EqualError(t, err, `spec.command: Invalid value: "string": spec.command in body must be of type array`)

	job = mlv1alpha1.TrainingJob{}
	require.NoError(t, json.Unmarshal([]byte(`{"metadata":{"name":"j"},"spec":{"workers":3,"Image":"ignored","image":"img"}}`), &job))
	require.Equal(t, "j", job.Name)
	require.Equal(t, int32(3), job.Spec.Workers)
	require.Equal(t, "img", job.Spec.Image, "field names are case-sensitive, as in the API machinery")
}
