package testutil

import (
	"context"
	"os"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Timeout and Interval bound every Eventually in the suites. Timeout is
// 10 s, or $TESTUTIL_TIMEOUT (a Go duration): `make test` sets 30s when it
// builds with the race detector (its default), which slows everything
// several times over.
var Timeout = timeoutFromEnv(10 * time.Second)

// Interval is how often Eventually polls.
const Interval = 250 * time.Millisecond

func timeoutFromEnv(def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv("TESTUTIL_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return def
}

// Eventually polls cond until it returns true or Timeout passes.
func Eventually(t testing.TB, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			if len(msgAndArgs) > 0 {
				t.Fatalf("condition not met within %s: %v", Timeout, msgAndArgs)
			}
			t.Fatalf("condition not met within %s", Timeout)
		}
		time.Sleep(Interval)
	}
}

// EventuallyLeaseHeld waits until the named lease has a holder and returns it.
func EventuallyLeaseHeld(t testing.TB, c client.Client, namespace, name string) string {
	t.Helper()
	var holder string
	Eventually(t, func() bool {
		lease := &coordinationv1.Lease{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, lease); err != nil {
			return false
		}
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		return holder != ""
	}, "lease", namespace, name)
	return holder
}
