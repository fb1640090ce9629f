package integration_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mlv1alpha1 "github.com/ml-operator/ml-operator/api/v1alpha1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

const deprecation = "ml.example.com/v1alpha1 TrainingJob is deprecated; use ml.example.com/v1"

func alphaJob(name, ns string) *mlv1alpha1.TrainingJob {
	return &mlv1alpha1.TrainingJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: mlv1alpha1.GroupVersion.String(), Kind: "TrainingJob"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: mlv1alpha1.TrainingJobSpec{
			Framework: "tensorflow", Image: "tensorflow/tensorflow:2.18.0-gpu", Command: []string{"python", "train.py"},
			Workers: 3, GPUPerWorker: 2, CheckpointDir: "/ckpt", CheckpointInterval: 5,
			DataVolume:      &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "coco", ReadOnly: true},
			Hyperparameters: map[string]mlv1.HyperparameterValue{"lr": mlv1.NewHyperparameter("0.01")},
			RestartPolicy:   "Never",
		},
	}
}

// A v1alpha1 object is stored as v1 and reads back as v1 with every field
// mapped; the client that wrote it was warned that v1alpha1 is deprecated.
func TestV1Alpha1ReadsBackAsV1(t *testing.T) {
	ctx := context.Background()
	w := &warnings{}
	c := clientWithWarnings(t, w)
	in := alphaJob("alpha", testutil.Namespace(t, k8s))
	require.NoError(t, c.Create(ctx, in.DeepCopy()))
	assert.Contains(t, w.list(), deprecation)

	v1 := &mlv1.TrainingJob{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(in), v1))
	s := v1.Spec
	assert.Equal(t, mlv1.FrameworkTensorFlow, s.Framework)
	assert.Equal(t, in.Spec.Image, s.Image)
	assert.Equal(t, in.Spec.Command, s.Command)
	assert.Equal(t, int32(3), s.NumWorkers)
	assert.Equal(t, ptr.To[int32](2), s.GPUsPerWorker)
	assert.Equal(t, "/ckpt", s.Checkpoint.Path)
	assert.Equal(t, int32(5), s.Checkpoint.Frequency)
	assert.Equal(t, &mlv1.DataVolumeSpec{ClaimName: "coco", ReadOnly: true, MountPath: "/data"}, s.DataVolume)
	assert.Equal(t, `"0.01"`, string(s.Hyperparameters["lr"].Raw))
	assert.Equal(t, mlv1.RestartPolicyNever, s.RestartPolicy)
	assert.Equal(t, ptr.To[int32](2), s.NProcPerNode, "defaulted in v1 terms")
	assert.Empty(t, v1.Annotations, "the v1 form carries no conversion annotations")

	alpha := &mlv1alpha1.TrainingJob{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(in), alpha))
	assert.Equal(t, in.Spec, alpha.Spec, "the v1alpha1 form reads back as written")
}

// A v1 object reads back as v1alpha1; an update through v1alpha1 changes
// what v1alpha1 shows and keeps every v1-only field.
func TestV1ReadsBackAsV1Alpha1AndKeepsV1FieldsThroughIt(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)
	// v1alpha1 requires a command, so a job edited through it has one.
	in := testutil.TrainingJob("hub", ns).Workers(2).GPUs(4).NProcPerNode(2).Command("torchrun", "train.py").Obj()
	in.Spec.Checkpoint.KeepLast = 7
	in.Spec.DataVolume = &mlv1.DataVolumeSpec{ClaimName: "imagenet", MountPath: "/datasets"}
	in.Spec.Scheduling.QueueName = "research"
	in.Spec.Tracking = &mlv1.TrackingSpec{MLflow: &mlv1.MLflowSpec{TrackingURI: "http://mlflow:5000", ExperimentName: "resnet"}}
	require.NoError(t, k8s.Create(ctx, in))

	alpha := &mlv1alpha1.TrainingJob{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(in), alpha))
	assert.Equal(t, int32(2), alpha.Spec.Workers)
	assert.Equal(t, int32(4), alpha.Spec.GPUPerWorker)
	assert.Equal(t, &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "imagenet"}, alpha.Spec.DataVolume)
	require.Contains(t, alpha.Annotations, mlv1.AnnotationV1Spec)

	alpha.Spec.Workers = 6
	require.NoError(t, k8s.Update(ctx, alpha))

	v1 := &mlv1.TrainingJob{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(in), v1))
	assert.Equal(t, int32(6), v1.Spec.NumWorkers)
	assert.Equal(t, ptr.To[int32](2), v1.Spec.NProcPerNode)
	assert.Equal(t, int32(7), v1.Spec.Checkpoint.KeepLast)
	assert.Equal(t, "/datasets", v1.Spec.DataVolume.MountPath)
	assert.Equal(t, "research", v1.Spec.Scheduling.QueueName)
	assert.Equal(t, in.Spec.Tracking, v1.Spec.Tracking)
	assert.NotContains(t, v1.Annotations, mlv1.AnnotationV1Spec)
	in.Spec.NumWorkers = 6
	assert.Equal(t, in.Spec, v1.Spec, "nothing but numWorkers changed")
}

// Status states read as the nearest v1alpha1 phase, and a status written
// through v1alpha1 keeps the v1-only status.
func TestStatusThroughBothVersions(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)
	job := testutil.TrainingJob("status", ns).Obj()
	require.NoError(t, k8s.Create(ctx, job))
	for state, phase := range map[mlv1.TrainingJobState]mlv1alpha1.TrainingJobPhase{
		mlv1.StateInitializing: mlv1alpha1.PhasePending,
		mlv1.StateRestarting:   mlv1alpha1.PhaseRunning,
		mlv1.StateSuspended:    mlv1alpha1.PhasePending,
		mlv1.StateCompleted:    mlv1alpha1.PhaseSucceeded,
	} {
		job.Status = mlv1.TrainingJobStatus{State: state, Restarts: 2, Progress: "40%",
			WorkerStatuses: []mlv1.WorkerStatus{{Rank: 0, PodName: "status-worker-0", Phase: corev1.PodRunning, Node: "gpu-1"}}}
		require.NoError(t, k8s.Status().Update(ctx, job))
		alpha := &mlv1alpha1.TrainingJob{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(job), alpha))
		assert.Equal(t, phase, alpha.Status.Phase, "state %s", state)
		assert.Equal(t, []mlv1alpha1.WorkerStatus{{WorkerID: 0, PodName: "status-worker-0", Phase: corev1.PodRunning}}, alpha.Status.WorkerStatuses)
	}

	alpha := &mlv1alpha1.TrainingJob{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(job), alpha))
	alpha.Status.Phase = mlv1alpha1.PhaseFailed
	require.NoError(t, k8s.Status().Update(ctx, alpha))
	v1 := &mlv1.TrainingJob{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(job), v1))
	assert.Equal(t, mlv1.StateFailed, v1.Status.State)
	assert.Equal(t, int32(2), v1.Status.Restarts)
	assert.Equal(t, "40%", v1.Status.Progress)
	assert.Equal(t, "gpu-1", v1.Status.WorkerStatuses[0].Node)
}

// Lists convert item by item.
func TestListAsV1Alpha1(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)
	require.NoError(t, k8s.Create(ctx, testutil.TrainingJob("listed-v1", ns).Workers(5).Obj()))
	require.NoError(t, k8s.Create(ctx, alphaJob("listed-alpha", ns)))
	list := &mlv1alpha1.TrainingJobList{}
	require.NoError(t, k8s.List(ctx, list, client.InNamespace(ns)))
	workers := map[string]int32{}
	for _, j := range list.Items {
		workers[j.Name] = j.Spec.Workers
	}
	assert.Equal(t, map[string]int32{"listed-v1": 5, "listed-alpha": 3}, workers)
}

// A PUT of a v1alpha1 manifest without the v1-spec annotation (what
// `kubectl replace -f` sends) that only changes workers is accepted: the
// checkpoint storage defaulted at creation (type pvc, size, access modes),
// which the v1alpha1 form cannot carry, is kept rather than counted as a
// change to an immutable field.
func TestV1Alpha1ReplaceWithoutAnnotationKeepsStorage(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)
	in := alphaJob("replaced", ns)
	require.NoError(t, k8s.Create(ctx, in.DeepCopy()))
	before := &mlv1.TrainingJob{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(in), before))
	require.Equal(t, mlv1.StorageTypePVC, before.Spec.Checkpoint.Storage.Type)

	cur := &mlv1alpha1.TrainingJob{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(in), cur))
	replacement := alphaJob("replaced", ns)
	replacement.ResourceVersion = cur.ResourceVersion
	replacement.Spec.Workers = 5
	require.NotContains(t, replacement.Annotations, mlv1.AnnotationV1Spec)
	require.NoError(t, k8s.Update(ctx, replacement))

	after := &mlv1.TrainingJob{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(in), after))
	assert.Equal(t, int32(5), after.Spec.NumWorkers)
	assert.Equal(t, before.Spec.Checkpoint.Storage, after.Spec.Checkpoint.Storage)
	before.Spec.NumWorkers = 5
	assert.Equal(t, before.Spec, after.Spec, "nothing but numWorkers changed")
}

// A v1alpha1 manifest with a value of the wrong type is refused naming the
// field and the wanted type. The API server converts the object for the v1
// admission webhooks before its own schema check, so it is the conversion
// webhook that fails, and the API server reports any conversion failure as
// an internal error (500, twice wrapped); only the text is ours to choose.
func TestV1Alpha1WrongTypeNamesTheField(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": mlv1alpha1.GroupVersion.String(), "kind": "TrainingJob",
		"metadata": map[string]any{"name": "alpha-workers-string", "namespace": ns},
		"spec": map[string]any{
			"framework": "pytorch", "image": "pytorch/pytorch:1.12.0-cuda11.3",
			"command": []any{"python", "/workspace/train.py"}, "workers": "2",
		},
	}}
	err := k8s.Create(ctx, o)
	require.EqualError(t, err, "Internal error occurred: Internal error occurred: conversion webhook for ml.example.com/v1alpha1, Kind=TrainingJob failed: "+
		`spec.workers: Invalid value: "string": spec.workers in body must be of type integer`)
	assert.True(t, apierrors.IsInternalError(err), "the API server answers a failed conversion with 500")
}
