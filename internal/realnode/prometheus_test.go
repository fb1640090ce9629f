package realnode

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The scrape config gives the series the namespace and pod labels the
// analysis presets select on, keeps only ModelDeployment pods in the
// namespaces asked for, and never scrapes init containers.
func TestPrometheusConfig(t *testing.T) {
	type relabel struct {
		SourceLabels []string `json:"source_labels"`
		Regex        string   `json:"regex"`
		Action       string   `json:"action"`
		TargetLabel  string   `json:"target_label"`
	}
	var cfg struct {
		Global struct {
			ScrapeInterval string `json:"scrape_interval"`
			ScrapeTimeout  string `json:"scrape_timeout"`
			Evaluation     string `json:"evaluation_interval"`
		} `json:"global"`
		ScrapeConfigs []struct {
			JobName string `json:"job_name"`
			SD      []struct {
				Role string `json:"role"`
			} `json:"kubernetes_sd_configs"`
			Relabel []relabel `json:"relabel_configs"`
		} `json:"scrape_configs"`
	}
	require.NoError(t, yaml.UnmarshalStrict([]byte(PrometheusConfig(PrometheusOptions{Namespaces: "e2ereal-pd-.+", ScrapeInterval: 2 * time.Second})), &cfg))
	require.Equal(t, "2s", cfg.Global.ScrapeInterval)
	require.Equal(t, "1s", cfg.Global.ScrapeTimeout)
	require.Equal(t, "1500ms", promDuration(1500*time.Millisecond))
	require.Len(t, cfg.ScrapeConfigs, 1)
	job := cfg.ScrapeConfigs[0]
	require.Equal(t, "model-servers", job.JobName)
	require.Equal(t, "pod", job.SD[0].Role)

	keep := map[string]string{}
	drop := map[string]string{}
	targets := map[string]string{}
	for _, r := range job.Relabel {
		require.Len(t, r.SourceLabels, 1)
		switch r.Action {
		case "keep":
			keep[r.SourceLabels[0]] = r.Regex
		case "drop":
			drop[r.SourceLabels[0]] = r.Regex
		case "":
			targets[r.TargetLabel] = r.SourceLabels[0]
		default:
			t.Fatalf("unexpected action %q", r.Action)
		}
	}
	require.Equal(t, map[string]string{
		"namespace": "__meta_kubernetes_namespace",
		"pod":       "__meta_kubernetes_pod_name",
	}, targets)
	require.Equal(t, ".+", keep["__meta_kubernetes_pod_label_ml_example_com_modeldeployment"])
	require.Equal(t, "true", drop["__meta_kubernetes_pod_container_init"])
	// Prometheus anchors relabeling regexes at both ends.
	ns := regexp.MustCompile("^(?:" + keep["__meta_kubernetes_namespace"] + ")$")
	require.True(t, ns.MatchString("e2ereal-pd-x7k2q"))
	require.False(t, ns.MatchString("e2ereal-x7k2q"))
	require.False(t, ns.MatchString("kube-system"))
}

// Prometheus reads pods only, runs as a non-root number with a read-only
// root filesystem, keeps its TSDB in an emptyDir, and is found at
// PrometheusURL.
func TestPrometheusObjects(t *testing.T) {
	var dep *appsv1.Deployment
	var svc *corev1.Service
	var role *rbacv1.ClusterRole
	for _, obj := range prometheusObjects(PrometheusOptions{Namespaces: ".+", ScrapeInterval: time.Second}) {
		switch o := obj.(type) {
		case *appsv1.Deployment:
			dep = o
		case *corev1.Service:
			svc = o
		case *rbacv1.ClusterRole:
			role = o
		case *corev1.ConfigMap:
			require.Contains(t, o.Data["prometheus.yml"], "job_name: model-servers")
		}
	}
	require.NotNil(t, dep)
	require.NotNil(t, svc)
	require.NotNil(t, role)
	require.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}, role.Rules)
	require.Equal(t, PrometheusURL, fmt.Sprintf("http://%s.%s.svc.cluster.local:%d", svc.Name, svc.Namespace, svc.Spec.Ports[0].Port))
	pod := dep.Spec.Template.Spec
	require.Equal(t, int64(PrometheusUser), *pod.SecurityContext.RunAsUser)
	c := pod.Containers[0]
	require.Equal(t, PrometheusImage, c.Image)
	require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	require.Contains(t, c.Args, "--storage.tsdb.path=/prometheus")
	require.Equal(t, "/prometheus", c.VolumeMounts[1].MountPath)
	require.NotNil(t, pod.Volumes[1].EmptyDir)
}
