package manager

import (
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		name        string
		env         map[string]string
		flag        int
		want        int
		wantFromEnv bool
	}{
		{"no GOGC: the flag", nil, 50, 50, false},
		{"empty GOGC: the flag", map[string]string{"GOGC": ""}, 50, 50, false},
		{"GOGC wins", map[string]string{"GOGC": "80"}, 50, 80, true},
		{"GOGC off", map[string]string{"GOGC": "off"}, 50, -1, true},
		{"GOGC the runtime cannot read: its 100", map[string]string{"GOGC": "lots"}, 50, 100, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, fromEnv := EffectiveGCPercent(tc.flag, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantFromEnv, fromEnv)
		})
	}
}

// runtimeGCPercent reads the target the runtime runs with.
func runtimeGCPercent() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

func TestApplyGCPercentSetsTheRuntimesTarget(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	noEnv := func(string) (string, bool) { return "", false }

	got, fromEnv := applyGCPercent(37, noEnv)
	assert.Equal(t, 37, got)
	assert.False(t, fromEnv)
	assert.Equal(t, int64(37), runtimeGCPercent())

	// With GOGC set the runtime already applied it: the flag changes nothing.
	got, fromEnv = applyGCPercent(20, func(k string) (string, bool) { return "90", k == "GOGC" })
	assert.Equal(t, 90, got)
	assert.True(t, fromEnv)
	assert.Equal(t, int64(37), runtimeGCPercent(), "left as it was")
}
