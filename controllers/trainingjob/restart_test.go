package trainingjob

import (
	"testing"
	"time"
)

func TestBackoffFor(t *testing.T) {
	for restarts, want := range map[int32]time.Duration{
		0: 0, 1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 4: 80 * time.Second,
		5: 160 * time.Second, 6: 5 * time.Minute, 10: 5 * time.Minute,
	} {
		if got := backoffFor(restarts, 10*time.Second, 5*time.Minute); got != want {
			t.Errorf("backoffFor(%d) = %s, want %s", restarts, got, want)
		}
	}
}
