package manager

import (
	"flag"
	"testing"
	"time"
)

// jitterFactor is client-go's leader-election retry jitter (leaderelection.JitterFactor).
const jitterFactor = 1.2

// A standby takes over a killed leader's lease at most about LeaseDuration
// after it last saw a renewal, plus a jittered retry on each side; the chaos
// suite (docs/chaos.md) requires failover under 20 s.
func TestDefaultLeaderElectionFailsOverUnder20s(t *testing.T) {
	o := NewOptions()
	retry := time.Duration(float64(o.RetryPeriod) * jitterFactor)
	worst := o.LeaseDuration + 2*retry
	if worst >= 20*time.Second {
		t.Errorf("worst-case failover %s (lease %s + 2 x jittered retry %s) is not under 20s", worst, o.LeaseDuration, retry)
	}
	// client-go refuses these (NewLeaderElector): keep the defaults valid.
	if o.LeaseDuration <= o.RenewDeadline {
		t.Errorf("lease duration %s must exceed the renew deadline %s", o.LeaseDuration, o.RenewDeadline)
	}
	if o.RenewDeadline <= retry {
		t.Errorf("renew deadline %s must exceed the jittered retry period %s", o.RenewDeadline, retry)
	}
}

func TestLeaderElectionTimingFlags(t *testing.T) {
	o := NewOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse([]string{
		"--leader-election-lease-duration=30s",
		"--leader-election-renew-deadline=20s",
		"--leader-election-retry-period=5s",
	}); err != nil {
		t.Fatal(err)
	}
	if o.LeaseDuration != 30*time.Second || o.RenewDeadline != 20*time.Second || o.RetryPeriod != 5*time.Second {
		t.Errorf("parsed lease %s, renew %s, retry %s; want 30s, 20s, 5s", o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
	}
	if got := positive(o.LeaseDuration); got == nil || *got != 30*time.Second {
		t.Errorf("positive(30s) = %v", got)
	}
	if positive(0) != nil {
		t.Error("an unset duration must leave controller-runtime's default (nil)")
	}
}

func TestMetricsBindAddressFollowsMetricsSecure(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ":8443"},
		{[]string{"--metrics-secure=false"}, ":8080"},
		{[]string{"--metrics-secure=false", "--metrics-bind-address=:9090"}, ":9090"},
		{[]string{"--metrics-bind-address=0"}, "0"},
	} {
		o := NewOptions()
		fs := flag.NewFlagSet("manager", flag.ContinueOnError)
		o.BindFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if got := o.MetricsBindAddress(); got != tc.want {
			t.Errorf("%v: metrics bind address %q, want %q", tc.args, got, tc.want)
		}
	}
}
