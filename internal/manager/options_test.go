package manager

import (
	"bytes"
	"encoding/json"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// logLine parses args into fresh options, logs one line with their logger
// and returns what it wrote.
func logLine(t *testing.T, args ...string) string {
	t.Helper()
	o := NewOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.BindFlags(fs)
	require.NoError(t, fs.Parse(args))
	var buf bytes.Buffer
	o.zap.DestWriter = &buf
	o.Logger().WithName("setup").Info("starting manager", "qps", 50)
	return strings.TrimSpace(buf.String())
}

// Production logs are JSON objects (zap through zapr), one per line;
// --zap-devel switches to zap's human-readable console encoder.
func TestLoggerIsJSONUnlessDevel(t *testing.T) {
	var entry map[string]any
	line := logLine(t)
	require.NoError(t, json.Unmarshal([]byte(line), &entry), "production log line is not JSON: %s", line)
	assert.Equal(t, "starting manager", entry["msg"])
	assert.Equal(t, "setup", entry["logger"])
	assert.Equal(t, "info", entry["level"])
	assert.EqualValues(t, 50, entry["qps"])
	ts, _ := entry["ts"].(string)
	_, err := time.Parse("2006-01-02T15:04:05.000Z0700", ts)
	assert.NoError(t, err, "production timestamps are ISO 8601 (the documented --zap-time-encoding default): %v", entry["ts"])

	line = logLine(t, "--zap-devel")
	assert.Error(t, json.Unmarshal([]byte(line), &entry), "development log line is JSON: %s", line)
	assert.Contains(t, line, "INFO")
	assert.Contains(t, line, "setup")
	assert.Contains(t, line, "starting manager")
	assert.Contains(t, line, `{"qps": 50}`)
}

// The manager's client talks to the API server at 50 QPS with a burst of
// 100 by default, and at what --kube-api-qps and --kube-api-burst say.
func TestClientRateLimits(t *testing.T) {
	in := &rest.Config{Host: "https://example:6443", QPS: 5, Burst: 10}
	for _, c := range []struct {
		args  []string
		qps   float32
		burst int
	}{
		{nil, 50, 100},
		{[]string{"--kube-api-qps=7.5", "--kube-api-burst=15"}, 7.5, 15},
	} {
		o := NewOptions()
		fs := flag.NewFlagSet("manager", flag.ContinueOnError)
		o.BindFlags(fs)
		require.NoError(t, fs.Parse(c.args))
		got := clientConfig(in, o)
		assert.Equal(t, c.qps, got.QPS, "qps with %v", c.args)
		assert.Equal(t, c.burst, got.Burst, "burst with %v", c.args)
		assert.Equal(t, in.Host, got.Host)
	}
	assert.Equal(t, float32(5), in.QPS, "the caller's config is left alone")
	assert.Equal(t, 10, NewOptions().MaxConcurrentReconciles, "concurrent reconciles per controller")
}

// --default-gateway takes namespace/name[/sectionName] and refuses anything
// else, naming the rule; --istio-mesh is a plain switch.
func TestRoutingFlags(t *testing.T) {
	parse := func(args ...string) (*Options, error) {
		o := NewOptions()
		fs := flag.NewFlagSet("manager", flag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		o.BindFlags(fs)
		return o, fs.Parse(args)
	}
	o, err := parse()
	require.NoError(t, err)
	assert.Nil(t, o.DefaultGateway)
	assert.False(t, o.IstioMesh)

	o, err = parse("--default-gateway=gateways/models/https", "--istio-mesh")
	require.NoError(t, err)
	assert.Equal(t, &mlv1.GatewayReference{Namespace: "gateways", Name: "models", SectionName: "https"}, o.DefaultGateway)
	assert.True(t, o.IstioMesh)
	o, err = parse("--default-gateway=gateways/models")
	require.NoError(t, err)
	assert.Equal(t, &mlv1.GatewayReference{Namespace: "gateways", Name: "models"}, o.DefaultGateway)

	for _, bad := range []string{"models", "gateways/", "/models", "a/b/c/d", "Gate_ways/models"} {
		_, err := parse("--default-gateway=" + bad)
		assert.Error(t, err, bad)
	}
	_, err = parse("--default-gateway=models")
	assert.ErrorContains(t, err, "is not namespace/name or namespace/name/sectionName")
}

// The pod security defaults: no IDs and HOME at /home/ml-operator unless
// the --pod-* flags say otherwise; an empty --pod-home turns HOME off.
func TestPodSecurityFlags(t *testing.T) {
	parse := func(args ...string) *Options {
		o := NewOptions()
		fs := flag.NewFlagSet("manager", flag.ContinueOnError)
		o.BindFlags(fs)
		require.NoError(t, fs.Parse(args))
		return o
	}
	o := parse()
	assert.Nil(t, o.PodSecurity.RunAsUser)
	assert.Nil(t, o.PodSecurity.RunAsGroup)
	assert.Nil(t, o.PodSecurity.FSGroup)
	assert.True(t, o.PodSecurity.AutoIDs, "unset: the cluster chooses (manager.New)")
	assert.Equal(t, "/home/ml-operator", o.PodSecurity.Home)
	o = parse("--pod-run-as-user=")
	assert.False(t, o.PodSecurity.AutoIDs, "an empty ID is the admin's choice: none on every cluster")
	assert.Nil(t, o.PodSecurity.RunAsUser)

	o = parse("--pod-run-as-user=1000", "--pod-run-as-group=0", "--pod-fs-group=1000", "--pod-home=")
	assert.Equal(t, []int64{1000, 0, 1000}, []int64{*o.PodSecurity.RunAsUser, *o.PodSecurity.RunAsGroup, *o.PodSecurity.FSGroup})
	assert.Empty(t, o.PodSecurity.Home)

	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	NewOptions().BindFlags(fs)
	assert.Error(t, fs.Parse([]string{"--pod-run-as-user=nobody"}))
	_, err := New(&rest.Config{Host: "https://example:6443"}, parse("--pod-run-as-user=0"))
	assert.EqualError(t, err, "--pod-run-as-user 0: must be 1 or more (runAsNonRoot refuses user 0)")
}
