package trainingjob_test

import (
	"sync"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// watchStates records, in order and without repeats, every state the API
// server stores for a job; call the returned function to read them.
func watchStates(t *testing.T, namespace, name string) func() []mlv1.TrainingJobState {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &mlv1.TrainingJobList{}, client.InNamespace(namespace))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var states []mlv1.TrainingJobState
	go func() {
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*mlv1.TrainingJob)
			if !ok || j.Name != name || j.Status.State == "" {
				continue
			}
			mu.Lock()
			if len(states) == 0 || states[len(states)-1] != j.Status.State {
				states = append(states, j.Status.State)
			}
			mu.Unlock()
		}
	}()
	return func() []mlv1.TrainingJobState {
		mu.Lock()
		defer mu.Unlock()
		return append([]mlv1.TrainingJobState(nil), states...)
	}
}

// reconcilePasses is how many passes the TrainingJob controller has run.
func reconcilePasses(t *testing.T) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "trainingjob_operator_reconcile_duration_seconds" {
			return float64(f.GetMetric()[0].GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// jobEvents are the events regarding a job.
func jobEvents(t *testing.T, job *mlv1.TrainingJob) []eventsv1.Event {
	t.Helper()
	events, err := testutil.EventsAbout(ctx, env.Client, job.Namespace, "TrainingJob", job.Name)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// eventReasons lists the reasons of the events on a job.
func eventReasons(t *testing.T, job *mlv1.TrainingJob) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range jobEvents(t, job) {
		out[e.Reason] = e.Note
	}
	return out
}

// waitEventNote waits until one of the job's events with the reason has a
// note holding every one of parts.
func waitEventNote(t *testing.T, job *mlv1.TrainingJob, reason, what string, parts ...string) {
	t.Helper()
	testutil.Eventually(t, func() bool {
		for _, e := range jobEvents(t, job) {
			if e.Reason == reason && testutil.ContainsAll(e.Note, parts...) {
				return true
			}
		}
		return false
	}, what)
}

// waitEvents waits until the job has events with every reason.
func waitEvents(t *testing.T, job *mlv1.TrainingJob, reasons ...string) map[string]string {
	t.Helper()
	var got map[string]string
	testutil.Eventually(t, func() bool {
		got = eventReasons(t, job)
		for _, r := range reasons {
			if _, ok := got[r]; !ok {
				return false
			}
		}
		return true
	}, "events", reasons)
	return got
}

// condition returns a job condition, or nil.
func condition(j *mlv1.TrainingJob, t string) *struct{ Status, Reason, Message string } {
	for _, c := range j.Status.Conditions {
		if c.Type == t {
			return &struct{ Status, Reason, Message string }{string(c.Status), c.Reason, c.Message}
		}
	}
	return nil
}
