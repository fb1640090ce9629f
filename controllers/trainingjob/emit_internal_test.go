package trainingjob

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/eventnote"
)

// A note listing every stuck rank of a large gang is longer than the
// 1024 bytes the API server accepts for an Event; emitted as it is, the
// Event would be refused and lost. emit fits it.
func TestEmitFitsANoteTooLongForTheAPIServer(t *testing.T) {
	rec := events.NewFakeRecorder(4)
	r := &Reconciler{recorder: rec}
	var ranks []string
	for i := range 200 {
		ranks = append(ranks, mlv1.WorkerPodName("big", int32(i)))
	}
	p := &pass{job: &mlv1.TrainingJob{}}
	p.event(corev1.EventTypeWarning, mlv1.EventFailed, "ranks unschedulable: %s", strings.Join(ranks, ", "))
	require.Greater(t, len(p.events[0].note), eventnote.MaxBytes)
	r.emit(p, true)
	require.Len(t, rec.Events, 1)
	got := <-rec.Events
	note := strings.TrimPrefix(got, corev1.EventTypeWarning+" "+mlv1.EventFailed+" ")
	assert.Equal(t, eventnote.Fit(p.events[0].note), note)
	assert.LessOrEqual(t, len(note), eventnote.MaxBytes)
}
