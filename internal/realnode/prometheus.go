package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/internal/images"
)

// The Prometheus the real node runs for the progressive-delivery tests:
// bin/prometheus (`make prometheus`: cmd/prometheus of the module the
// project's go.mod requires, with Kubernetes discovery only) alone in a
// layer, as a Deployment and a Service in a namespace of its own.
const (
	PrometheusImage     = "realnode.local/prometheus:v3.12.0"
	PrometheusNamespace = "ml-operator-prometheus"
	PrometheusName      = "prometheus"
	PrometheusPort      = 9090
	// PrometheusUser is the numeric user Prometheus runs as (nobody).
	PrometheusUser = 65534
)

// PrometheusURL is the in-cluster address of that Prometheus: the manager's
// --prometheus-url on the real node.
var PrometheusURL = fmt.Sprintf("http://%s.%s.svc.cluster.local:%d", PrometheusName, PrometheusNamespace, PrometheusPort)

// PrometheusOptions say what the real node's Prometheus runs and scrapes.
type PrometheusOptions struct {
	// Binary is bin/prometheus.
	Binary string
	// Namespaces is a regular expression (RE2, anchored at both ends as
	// Prometheus' relabeling anchors it) of the namespaces whose
	// ModelDeployment pods are scraped; ".+" for every namespace.
	Namespaces string
	// ScrapeInterval between two scrapes of a pod (Prometheus' default is
	// 1m; the tests use seconds).
	ScrapeInterval time.Duration
}

// PrometheusConfig is prometheus.yml: one job, model-servers, that finds
// the pods of every ModelDeployment (label ml.example.com/modeldeployment)
// in the namespaces o.Namespaces matches through Kubernetes service
// discovery (role pod: one target per declared container port, so the
// model server's port), and gives each series the namespace and pod labels
// the analysis presets select on (internal/integrations/prometheus), as
// Prometheus' usual Kubernetes pod scrape config does. Init containers
// (the storage initializer) are not scraped.
func PrometheusConfig(o PrometheusOptions) string {
	interval := o.ScrapeInterval
	if interval <= 0 {
		interval = time.Minute
	}
	timeout := max(interval/2, 500*time.Millisecond)
	return fmt.Sprintf(`global:
  scrape_interval: %s
  scrape_timeout: %s
  evaluation_interval: 1m
scrape_configs:
- job_name: model-servers
  kubernetes_sd_configs:
  - role: pod
  relabel_configs:
  - source_labels: [__meta_kubernetes_pod_label_ml_example_com_modeldeployment]
    regex: .+
    action: keep
  - source_labels: [__meta_kubernetes_namespace]
    regex: %s
    action: keep
  - source_labels: [__meta_kubernetes_pod_container_init]
    regex: "true"
    action: drop
  - source_labels: [__meta_kubernetes_pod_phase]
    regex: Succeeded|Failed
    action: drop
  - source_labels: [__meta_kubernetes_namespace]
    target_label: namespace
  - source_labels: [__meta_kubernetes_pod_name]
    target_label: pod
`, promDuration(interval), promDuration(timeout), strconv.Quote(o.Namespaces))
}

// promDuration writes d as Prometheus reads durations: whole seconds, or
// milliseconds.
func promDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// prometheusObjects are Prometheus' namespace, service account, read-only
// RBAC on pods (its discovery), configuration, Deployment and Service.
func prometheusObjects(o PrometheusOptions) []client.Object {
	labels := map[string]string{"app.kubernetes.io/name": PrometheusName}
	ns := PrometheusNamespace
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: PrometheusName, Namespace: ns}},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "realnode:prometheus"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "realnode:prometheus"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "realnode:prometheus"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: PrometheusName, Namespace: ns}},
		},
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: PrometheusName, Namespace: ns},
			Data:       map[string]string{"prometheus.yml": PrometheusConfig(o)},
		},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: PrometheusName, Namespace: ns, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						ServiceAccountName: PrometheusName,
						SecurityContext: &corev1.PodSecurityContext{
							RunAsNonRoot:   ptr.To(true),
							RunAsUser:      ptr.To[int64](PrometheusUser),
							RunAsGroup:     ptr.To[int64](PrometheusUser),
							FSGroup:        ptr.To[int64](PrometheusUser),
							SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
						Containers: []corev1.Container{{
							Name:  "prometheus",
							Image: PrometheusImage,
							Args: []string{
								"--config.file=/etc/prometheus/prometheus.yml",
								"--storage.tsdb.path=/prometheus",
								"--storage.tsdb.retention.time=2h",
								fmt.Sprintf("--web.listen-address=:%d", PrometheusPort),
							},
							Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: PrometheusPort}},
							VolumeMounts: []corev1.VolumeMount{
								{Name: "config", MountPath: "/etc/prometheus", ReadOnly: true},
								{Name: "data", MountPath: "/prometheus"},
							},
							ReadinessProbe: &corev1.Probe{
								ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/-/ready", Port: intstr.FromInt32(PrometheusPort)}},
								PeriodSeconds: 1,
							},
							SecurityContext: &corev1.SecurityContext{
								AllowPrivilegeEscalation: ptr.To(false),
								ReadOnlyRootFilesystem:   ptr.To(true),
								Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							},
						}},
						Volumes: []corev1.Volume{
							{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
								LocalObjectReference: corev1.LocalObjectReference{Name: PrometheusName},
							}}},
							{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						},
					},
				},
			},
		},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: PrometheusName, Namespace: ns, Labels: labels},
			Spec: corev1.ServiceSpec{
				Selector: labels,
				Ports:    []corev1.ServicePort{{Name: "web", Port: PrometheusPort, TargetPort: intstr.FromInt32(PrometheusPort)}},
			},
		},
	}
}

// DeployPrometheus pushes bin/prometheus as PrometheusImage, creates
// Prometheus' objects and returns once its pod is Ready (its TSDB is open
// and its configuration loaded). The manager reaches it at PrometheusURL;
// PrometheusPodURL is its address from this machine.
func (n *Node) DeployPrometheus(ctx context.Context, o PrometheusOptions) error {
	began := time.Now()
	if _, err := os.Stat(o.Binary); err != nil {
		return fmt.Errorf("prometheus: %w: run `make prometheus`", err)
	}
	if err := n.PushImage(ctx, images.Spec{
		Ref:        PrometheusImage,
		Files:      []images.File{{Source: o.Binary, Path: "/bin/prometheus"}},
		Entrypoint: []string{"/bin/prometheus"},
		User:       fmt.Sprintf("%d:%d", PrometheusUser, PrometheusUser),
	}); err != nil {
		return err
	}
	n.logf("Prometheus image %s built and pushed (%s)", PrometheusImage, time.Since(began).Round(100*time.Millisecond))
	began = time.Now()
	for _, obj := range prometheusObjects(o) {
		if err := n.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	if err := poll(ctx, 3*time.Minute, "Prometheus Available", func() (bool, error) {
		d := &appsv1.Deployment{}
		if err := n.Client.Get(ctx, client.ObjectKey{Namespace: PrometheusNamespace, Name: PrometheusName}, d); err != nil {
			return false, err
		}
		return d.Status.ReadyReplicas >= 1, fmt.Errorf("ready replicas %d", d.Status.ReadyReplicas)
	}, n.kubelet); err != nil {
		return fmt.Errorf("%w\n%s", err, n.NamespaceDiagnostics(ctx, PrometheusNamespace))
	}
	n.logf("Prometheus Ready at %s, scraping ModelDeployment pods in namespaces %q every %s (%s)",
		PrometheusURL, o.Namespaces, o.ScrapeInterval, time.Since(began).Round(100*time.Millisecond))
	return nil
}

// PrometheusPodURL is the base URL of the Ready Prometheus pod, on its pod
// address: reachable from this machine (a ClusterIP is only reachable from
// the pod network).
func (n *Node) PrometheusPodURL(ctx context.Context) (string, error) {
	pods := &corev1.PodList{}
	if err := n.Client.List(ctx, pods, client.InNamespace(PrometheusNamespace), client.MatchingLabels{"app.kubernetes.io/name": PrometheusName}); err != nil {
		return "", err
	}
	var states []string
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				return "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(PrometheusPort)), nil
			}
		}
		states = append(states, fmt.Sprintf("%s %s", p.Name, p.Status.Phase))
	}
	return "", fmt.Errorf("no Ready Prometheus pod in %s (%s)", PrometheusNamespace, strings.Join(states, ", "))
}
