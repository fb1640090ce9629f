package manager

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envSamples is a value for every manager flag that differs from its
// default. A new flag without a sample fails TestEveryFlagHasAnEnvForm,
// so its environment form is tested too.
var envSamples = map[string]string{
	"default-command":                "pytorch=python /opt/train.py --model={model} {hyperparameters};jax=",
	"default-gateway":                "gateways/public/https",
	"default-image":                  "pytorch=registry.internal/pytorch:2.5",
	"dial-loopback-only":             "true",
	"enable-webhooks":                "false",
	"gc-percent":                     "80",
	"gpu-node-selector":              "accelerator=nvidia-a100,pool=training",
	"health-probe-bind-address":      ":9081",
	"istio-mesh":                     "true",
	"kube-api-burst":                 "300",
	"kube-api-qps":                   "150",
	"leader-elect":                   "false",
	"leader-election-id":             "other.example.com",
	"leader-election-lease-duration": "30s",
	"leader-election-namespace":      "ops",
	"leader-election-renew-deadline": "20s",
	"leader-election-retry-period":   "5s",
	"max-concurrent-reconciles":      "25",
	"metrics-bind-address":           ":9443",
	"metrics-cert-path":              "/etc/metrics-certs",
	"metrics-secure":                 "false",
	"prometheus-bearer-token-file":   "/etc/prometheus-auth/token",
	"prometheus-ca-file":             "/etc/prometheus-auth/service-ca.crt",
	"pod-fs-group":                   "2000",
	"pod-home":                       "/scratch/home",
	"pod-run-as-group":               "2000",
	"pod-run-as-user":                "2000",
	"pprof-bind-address":             "127.0.0.1:6060",
	"placement-timeout":              "45m0s",
	"prometheus-url":                 "https://thanos-querier.openshift-monitoring.svc:9091",
	"sync-period":                    "1h0m0s",
	"storage-initializer-image":      "registry.internal/ml-operator/storage-initializer:v9",
	"webhook-cert-path":              "/certs",
	"webhook-host":                   "127.0.0.1",
	"webhook-port":                   "10443",
	"zap-devel":                      "true",
	"zap-encoder":                    "console",
	"zap-log-level":                  "debug",
	"zap-stacktrace-level":           "panic",
	"zap-time-encoding":              "rfc3339",
}

func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parsed returns every flag's value after ParseArgs.
func parsed(t *testing.T, args []string, environ map[string]string) map[string]string {
	t.Helper()
	fs := newFlagSet()
	_, err := ParseArgs(fs, args, func(k string) (string, bool) { v, ok := environ[k]; return v, ok })
	require.NoError(t, err)
	out := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { out[f.Name] = f.Value.String() })
	return out
}

// TestEveryFlagHasAnEnvForm: for every flag the manager registers, its
// ML_OPERATOR_* variable alone gives the same setting as the flag on the
// command line, and a setting other than the default.
func TestEveryFlagHasAnEnvForm(t *testing.T) {
	defaults := parsed(t, nil, nil)
	require.NotEmpty(t, defaults)
	for name, def := range defaults {
		sample, ok := envSamples[name]
		if !assert.True(t, ok, "flag --%s has no sample in envSamples: add one, so its environment form %s is tested", name, EnvName(name)) {
			continue
		}
		fromFlag := parsed(t, []string{"--" + name + "=" + sample}, nil)[name]
		fromEnv := parsed(t, nil, map[string]string{EnvName(name): sample})[name]
		assert.NotEqual(t, def, fromEnv, "%s=%s did not change --%s from its default", EnvName(name), sample, name)
		assert.Equal(t, fromFlag, fromEnv, "%s and --%s disagree", EnvName(name), name)
	}
	for name := range envSamples {
		assert.Contains(t, defaults, name, "envSamples has %s, which is no manager flag", name)
	}
}

func TestEnvName(t *testing.T) {
	assert.Equal(t, "ML_OPERATOR_GPU_NODE_SELECTOR", EnvName("gpu-node-selector"))
	assert.Equal(t, "ML_OPERATOR_PROMETHEUS_URL", EnvName("prometheus-url"))
	assert.Equal(t, "ML_OPERATOR_MAX_CONCURRENT_RECONCILES", EnvName("max-concurrent-reconciles"))
}

// The command line wins over the environment, which wins over the
// default: the Deployment's own args (ports its Service and probes name,
// the certificate path) cannot be undone by an environment variable.
func TestCommandLineWinsOverEnv(t *testing.T) {
	got := parsed(t, []string{"--max-concurrent-reconciles=4"}, map[string]string{
		EnvName("max-concurrent-reconciles"): "40",
		EnvName("kube-api-qps"):              "80",
	})
	assert.Equal(t, "4", got["max-concurrent-reconciles"])
	assert.Equal(t, "80", got["kube-api-qps"])
}

// A bad value names the variable, the flag it stands for and the rule.
func TestBadEnvValueNamesTheVariable(t *testing.T) {
	_, err := ParseArgs(newFlagSet(), nil, func(k string) (string, bool) {
		switch k {
		case EnvName("max-concurrent-reconciles"):
			return "many", true
		case EnvName("gpu-node-selector"):
			return "accelerator", true
		}
		return "", false
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `ML_OPERATOR_MAX_CONCURRENT_RECONCILES="many" (the environment form of --max-concurrent-reconciles): parse error`)
	assert.Contains(t, err.Error(), `ML_OPERATOR_GPU_NODE_SELECTOR="accelerator" (the environment form of --gpu-node-selector): "accelerator" is not key=value`)
}
