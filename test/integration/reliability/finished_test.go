package reliability_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// finishedRecord is what must never change once a job is finished.
type finishedRecord struct {
	State                   mlv1.TrainingJobState
	Restarts, Disruptions   int32
	PlacementTimeouts       int32
	Attempt                 int32
	CompletionTime          string
	LastCondition           string
	LastConditionTransition string
}

func recordOf(j *mlv1.TrainingJob) finishedRecord {
	r := finishedRecord{
		State: j.Status.State, Restarts: j.Status.Restarts, Disruptions: j.Status.Disruptions,
		PlacementTimeouts: j.Status.PlacementTimeouts, Attempt: j.Status.Attempt(),
	}
	if j.Status.CompletionTime != nil {
		r.CompletionTime = j.Status.CompletionTime.UTC().Format(time.RFC3339)
	}
	if n := len(j.Status.Conditions); n > 0 {
		c := j.Status.Conditions[n-1]
		r.LastCondition = fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason)
		r.LastConditionTransition = c.LastTransitionTime.UTC().Format(time.RFC3339)
	}
	return r
}

// finishJob takes a 2-rank job through one gang restart (restarts 1) to
// Completed, or through a second failure past backoffLimit 1 to Failed, on
// reconciler r, and returns what it finished with.
func finishJob(t *testing.T, key client.ObjectKey, succeed bool, cleanPods mlv1.CleanPodPolicy) finishedRecord {
	t.Helper()
	r, clk := newJobReconcilerWithClock(t, interceptor.Funcs{})
	require.NoError(t, k8s.Create(ctx, testutil.TrainingJob(key.Name, key.Namespace).Workers(2).GPUs(0).
		BackoffLimit(1).CleanPodPolicy(cleanPods).Obj()))
	passSettled(t, r, key)
	setPods(t, key, corev1.PodRunning)
	passSettled(t, r, key)
	require.NoError(t, testutil.SetPodPhase(ctx, k8s, key.Namespace, key.Name+"-worker-1", corev1.PodFailed,
		testutil.WithExitCode("trainer", 1, "Error")))
	passSettled(t, r, key)
	require.Equal(t, int32(1), getJob(t, key).Status.Restarts)
	clk.Step(10 * time.Second)
	passSettled(t, r, key)
	require.Len(t, jobPods(t, key), 2, "the second attempt's gang")
	setPods(t, key, corev1.PodRunning)
	passSettled(t, r, key)
	if succeed {
		setPods(t, key, corev1.PodSucceeded, testutil.WithExitCode("trainer", 0, "Completed"))
	} else {
		require.NoError(t, testutil.SetPodPhase(ctx, k8s, key.Namespace, key.Name+"-worker-0", corev1.PodFailed,
			testutil.WithExitCode("trainer", 1, "Error")))
	}
	passSettled(t, r, key)
	job := getJob(t, key)
	want := mlv1.StateCompleted
	if !succeed {
		want = mlv1.StateFailed
	}
	require.Equal(t, want, job.Status.State, "conditions: %+v", job.Status.Conditions)
	require.Equal(t, int32(1), job.Status.Restarts)
	return recordOf(job)
}

// staysFinished passes r over the job until it settles, twice over, and
// checks that nothing about its end moved and no pod was created.
func staysFinished(t *testing.T, r *trainingjob.Reconciler, key client.ObjectKey, want finishedRecord, pods []string, after string) {
	t.Helper()
	passSettled(t, r, key)
	passSettled(t, r, key)
	assert.Equal(t, want, recordOf(getJob(t, key)), "after %s", after)
	assert.Subset(t, pods, jobPods(t, key), "after %s: no pod was created", after)
}

// A Failed or Completed job is never restarted again: not by a manager
// restart (a reconciler with nothing in memory), not by its pods being
// deleted (cleanPodPolicy, TTL cleaners, a user, the garbage collector),
// not by edits (spec, suspend and resume, metadata), and not by an upgrade
// that reads and writes it through the other API version. Its state, its
// restart, disruption and placement-timeout counters, its attempt and its
// completion time survive each.
func TestAFinishedJobStaysFinished(t *testing.T) {
	for _, tc := range []struct {
		name      string
		succeed   bool
		cleanPods mlv1.CleanPodPolicy
	}{
		{"Completed", true, mlv1.CleanPodPolicyNone},
		{"Failed", false, mlv1.CleanPodPolicyNone},
		{"CompletedWithCleanPodPolicyAll", true, mlv1.CleanPodPolicyAll},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := testutil.Namespace(t, k8s)
			key := client.ObjectKey{Namespace: ns, Name: "done"}
			want := finishJob(t, key, tc.succeed, tc.cleanPods)
			pods := jobPods(t, key)

			// A manager restart: a new reconciler, nothing in memory.
			restarted := newJobReconciler(t, interceptor.Funcs{})
			staysFinished(t, restarted, key, want, pods, "a manager restart")
			pods = jobPods(t, key)

			// Every pod deleted, as a TTL cleaner or a user would.
			for _, name := range pods {
				p := &corev1.Pod{}
				p.Name, p.Namespace = name, ns
				require.NoError(t, client.IgnoreNotFound(k8s.Delete(ctx, p, client.GracePeriodSeconds(0))))
			}
			staysFinished(t, restarted, key, want, nil, "its pods were deleted")

			// Edits: the spec, suspend then resume, metadata. Each is
			// either refused or changes nothing about the job's end.
			// The webhook refuses spec changes to a finished job; what it
			// lets through (metadata, a spec that stays equal) changes
			// nothing about the job's end.
			edits := []struct {
				what    string
				mutate  func(*mlv1.TrainingJob)
				refused bool
			}{
				{"numWorkers 2 -> 3", func(j *mlv1.TrainingJob) { j.Spec.NumWorkers = 3 }, true},
				{"a new image", func(j *mlv1.TrainingJob) { j.Spec.Image = "registry.example.com/trainer:v2" }, true},
				{"suspend", func(j *mlv1.TrainingJob) { j.Spec.Suspend = ptr.To(true) }, true},
				{"resume (suspend: false, as it already is)", func(j *mlv1.TrainingJob) { j.Spec.Suspend = ptr.To(false) }, false},
				{"a label", func(j *mlv1.TrainingJob) { j.Labels = map[string]string{"team": "vision"} }, false},
			}
			for _, e := range edits {
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					j := getJob(t, key)
					e.mutate(j)
					return k8s.Update(ctx, j)
				})
				if e.refused {
					require.Error(t, err, e.what)
					assert.True(t, apierrors.IsInvalid(err), "%s: %v", e.what, err)
					assert.Contains(t, err.Error(), "spec: Forbidden: the job has finished ("+string(want.State)+") and accepts no spec change", e.what)
				} else {
					require.NoError(t, err, e.what)
				}
				staysFinished(t, restarted, key, want, nil, "the edit "+e.what)
			}

			// An upgrade: the job read and written back through v1alpha1
			// (an older client, or the storage version migrator), then a
			// reconciler of the new version.
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				old := &unstructured.Unstructured{}
				old.SetAPIVersion("ml.example.com/v1alpha1")
				old.SetKind("TrainingJob")
				if err := k8s.Get(ctx, key, old); err != nil {
					return err
				}
				ann := old.GetAnnotations()
				if ann == nil {
					ann = map[string]string{}
				}
				ann["upgraded"] = "v0.2.0"
				old.SetAnnotations(ann)
				return k8s.Update(ctx, old)
			})
			require.NoError(t, err)
			require.Equal(t, "v0.2.0", getJob(t, key).Annotations["upgraded"])
			staysFinished(t, newJobReconciler(t, interceptor.Funcs{}), key, want, nil, "a write through v1alpha1 and a new manager")
		})
	}
}
