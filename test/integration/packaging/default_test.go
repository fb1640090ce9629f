package packaging

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// overlays are every kustomization a user may apply; each must build and
// decode with the real scheme.
var overlays = []string{
	"config/default",
	"config/overlays/monitoring",
	"config/overlays/metrics-http",
	"config/crd",
	"config/rbac",
	"config/manager",
	"config/certmanager",
	"config/network-policy",
	"config/prometheus",
	"config/grafana",
}

// The ports the manager serves.
const (
	webhookPort = 9443
	metricsPort = 8443
	probePort   = 8081
)

func TestEveryOverlayBuildsAndDecodes(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			buildAndDecode(t, dir)
		})
	}
}

func TestDefaultInstallsIntoItsNamespace(t *testing.T) {
	objs := buildAndDecode(t, "config/default")
	ns := onlyOne[*corev1.Namespace](t, objs)
	if ns.Name != installNamespace {
		t.Errorf("Namespace is %q, want %q", ns.Name, installNamespace)
	}
	if ns.Labels[psaapi.EnforceLevelLabel] != string(psaapi.LevelRestricted) {
		t.Errorf("namespace %s does not enforce the restricted Pod Security level: labels %v", ns.Name, ns.Labels)
	}
	clusterScoped := map[string]bool{"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true,
		"ClusterRoleBinding": true, "MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true}
	for _, o := range objs {
		if clusterScoped[o.GVK.Kind] {
			continue
		}
		if o.NS != installNamespace {
			t.Errorf("%s %s is in namespace %q, want %q", o.GVK.Kind, o.Name, o.NS, installNamespace)
		}
	}
	for _, kind := range []string{"CustomResourceDefinition", "Deployment", "ServiceAccount", "Service", "Certificate", "Issuer", "NetworkPolicy", "ClusterRole", "Role"} {
		if len(unstructuredOf(objs, kind)) == 0 {
			t.Errorf("config/default has no %s", kind)
		}
	}
}

// managerDeployment returns the manager Deployment and its manager container.
func managerDeployment(t *testing.T, objs []builtObject) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	d := onlyOne[*appsv1.Deployment](t, objs)
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			return d, c
		}
	}
	t.Fatalf("Deployment %s has no container named manager", d.Name)
	return nil, corev1.Container{}
}

func TestManagerDeploymentIsHighlyAvailableAndProbed(t *testing.T) {
	objs := buildAndDecode(t, "config/default")
	d, c := managerDeployment(t, objs)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %s, want 2", ptrString(d.Spec.Replicas))
	}
	for _, arg := range []string{"--leader-elect", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("manager args %v lack %s", c.Args, arg)
		}
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe missing or not HTTP", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port != intstr.FromInt32(probePort) {
			t.Errorf("%s probe is %s on %s, want %s on %d", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path, probePort)
		}
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("manager has no %s request", r)
		}
		if _, ok := c.Resources.Limits[r]; !ok {
			t.Errorf("manager has no %s limit", r)
		}
	}
	if !hasContainerPort(c, metricsPort) {
		t.Errorf("manager does not declare the metrics port %d", metricsPort)
	}
	pdbs := typedOf[*policyv1.PodDisruptionBudget](objs)
	if len(pdbs) != 1 || pdbs[0].Spec.MaxUnavailable == nil || pdbs[0].Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("want one PodDisruptionBudget allowing one manager replica down, got %v", pdbs)
	} else if sel, err := metav1.LabelSelectorAsSelector(pdbs[0].Spec.Selector); err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the PodDisruptionBudget does not select the manager pods")
	}
	if d.Spec.Template.Spec.ServiceAccountName == "" || d.Spec.Template.Spec.ServiceAccountName == "default" {
		t.Errorf("manager runs as service account %q, want its own", d.Spec.Template.Spec.ServiceAccountName)
	}
}

func ptrString(p *int32) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

func hasContainerPort(c corev1.Container, port int32) bool {
	for _, p := range c.Ports {
		if p.ContainerPort == port {
			return true
		}
	}
	return false
}

// TestManagerPodIsRestricted evaluates the manager's pod template with the
// Pod Security Admission library at the "restricted" level, and checks the
// hardening that level does not require.
func TestManagerPodIsRestricted(t *testing.T) {
	for _, dir := range []string{"config/default", "config/manager"} {
		t.Run(dir, func(t *testing.T) {
			d, c := managerDeployment(t, buildAndDecode(t, dir))
			evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
			if err != nil {
				t.Fatal(err)
			}
			results := evaluator.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()},
				&d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec)
			if agg := policy.AggregateCheckResults(results); !agg.Allowed {
				t.Errorf("manager pod violates Pod Security restricted: %s", agg.ForbiddenDetail())
			}
			sc := c.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Error("manager container root filesystem is not read-only")
			}
		})
	}
}

// TestRBACIsLeastPrivilege checks every role the install grants: no
// wildcards, no access to Secrets, no escalate/bind/impersonate, and every
// binding points at a role of the install and a service account of it.
func TestRBACIsLeastPrivilege(t *testing.T) {
	objs := buildAndDecode(t, "config/default")
	type namedRules struct {
		name  string
		rules []rbacv1.PolicyRule
	}
	var all []namedRules
	clusterRoles := map[string]bool{}
	roles := map[string]bool{}
	for _, r := range typedOf[*rbacv1.ClusterRole](objs) {
		all = append(all, namedRules{"ClusterRole " + r.Name, r.Rules})
		clusterRoles[r.Name] = true
	}
	for _, r := range typedOf[*rbacv1.Role](objs) {
		all = append(all, namedRules{"Role " + r.Name, r.Rules})
		roles[r.Name] = true
	}
	forbiddenVerbs := []string{"escalate", "bind", "impersonate", "*"}
	for _, nr := range all {
		for i, rule := range nr.rules {
			for _, field := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs, rule.ResourceNames, rule.NonResourceURLs} {
				for _, v := range field {
					if strings.Contains(v, "*") {
						t.Errorf("%s rule %d uses a wildcard %q", nr.name, i, v)
					}
				}
			}
			for _, res := range rule.Resources {
				if res == "secrets" || strings.HasPrefix(res, "secrets/") {
					t.Errorf("%s rule %d grants access to %s", nr.name, i, res)
				}
			}
			for _, verb := range rule.Verbs {
				if slices.Contains(forbiddenVerbs, verb) {
					t.Errorf("%s rule %d grants %q", nr.name, i, verb)
				}
			}
		}
	}
	serviceAccounts := map[string]bool{}
	for _, sa := range typedOf[*corev1.ServiceAccount](objs) {
		serviceAccounts[sa.Namespace+"/"+sa.Name] = true
	}
	checkSubjects := func(binding string, subjects []rbacv1.Subject) {
		for _, s := range subjects {
			if s.Kind != rbacv1.ServiceAccountKind || !serviceAccounts[s.Namespace+"/"+s.Name] {
				t.Errorf("%s binds %s %s/%s, which is not a service account of the install", binding, s.Kind, s.Namespace, s.Name)
			}
		}
	}
	for _, b := range typedOf[*rbacv1.ClusterRoleBinding](objs) {
		if b.RoleRef.Kind != "ClusterRole" || !clusterRoles[b.RoleRef.Name] {
			t.Errorf("ClusterRoleBinding %s refers to %s %s, which the install does not define", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
		checkSubjects("ClusterRoleBinding "+b.Name, b.Subjects)
	}
	for _, b := range typedOf[*rbacv1.RoleBinding](objs) {
		if !(b.RoleRef.Kind == "Role" && roles[b.RoleRef.Name]) && !(b.RoleRef.Kind == "ClusterRole" && clusterRoles[b.RoleRef.Name]) {
			t.Errorf("RoleBinding %s refers to %s %s, which the install does not define", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
		checkSubjects("RoleBinding "+b.Name, b.Subjects)
	}
	d, _ := managerDeployment(t, objs)
	if !serviceAccounts[d.Namespace+"/"+d.Spec.Template.Spec.ServiceAccountName] {
		t.Errorf("the manager's service account %s is not part of the install", d.Spec.Template.Spec.ServiceAccountName)
	}
}

// TestNetworkPolicyAdmitsOnlyWebhookAndMetrics checks that the policies
// select the manager pods and open only the webhook and metrics ports, the
// metrics port only from the monitoring namespace.
func TestNetworkPolicyAdmitsOnlyWebhookAndMetrics(t *testing.T) {
	objs := buildAndDecode(t, "config/default")
	d, _ := managerDeployment(t, objs)
	podLabels := labels.Set(d.Spec.Template.Labels)
	policies := typedOf[*networkingv1.NetworkPolicy](objs)
	if len(policies) == 0 {
		t.Fatal("config/default has no NetworkPolicy")
	}
	openPorts := map[int32]bool{}
	for _, np := range policies {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		if np.Spec.PodSelector.Size() == 0 || !sel.Matches(podLabels) {
			t.Errorf("NetworkPolicy %s does not select exactly the manager pods (selector %v)", np.Name, np.Spec.PodSelector.MatchLabels)
		}
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			t.Errorf("NetworkPolicy %s is not an Ingress policy", np.Name)
		}
		for i, rule := range np.Spec.Ingress {
			if len(rule.Ports) == 0 {
				t.Errorf("NetworkPolicy %s ingress rule %d opens every port", np.Name, i)
			}
			for _, p := range rule.Ports {
				if p.Port == nil || p.Port.Type != intstr.Int {
					t.Errorf("NetworkPolicy %s ingress rule %d has a port that is not a number", np.Name, i)
					continue
				}
				port := p.Port.IntVal
				openPorts[port] = true
				switch port {
				case webhookPort:
				case metricsPort:
					if !fromMonitoringNamespaceOnly(rule.From) {
						t.Errorf("NetworkPolicy %s opens the metrics port to %v, want only the monitoring namespace", np.Name, rule.From)
					}
				default:
					t.Errorf("NetworkPolicy %s opens port %d, want only %d (webhook) and %d (metrics)", np.Name, port, webhookPort, metricsPort)
				}
			}
		}
	}
	for _, port := range []int32{webhookPort, metricsPort} {
		if !openPorts[port] {
			t.Errorf("no NetworkPolicy admits port %d", port)
		}
	}
}

// fromMonitoringNamespaceOnly is true when every peer is a namespace selector
// (no pod selector, no IP block): the monitoring namespace or namespaces
// labelled for metrics scraping.
func fromMonitoringNamespaceOnly(peers []networkingv1.NetworkPolicyPeer) bool {
	if len(peers) == 0 {
		return false
	}
	for _, p := range peers {
		if p.NamespaceSelector == nil || p.PodSelector != nil || p.IPBlock != nil || p.NamespaceSelector.Size() == 0 {
			return false
		}
	}
	return true
}

// TestMetricsServiceReachesTheManager checks that the metrics Service selects
// the manager pods on the HTTPS metrics port, and that the ServiceMonitor
// selects that Service by its port name.
func TestMetricsServiceReachesTheManager(t *testing.T) {
	objs := buildAndDecode(t, "config/overlays/monitoring")
	d, _ := managerDeployment(t, objs)
	var metricsSvc *corev1.Service
	for _, s := range typedOf[*corev1.Service](objs) {
		if strings.Contains(s.Name, "metrics") {
			metricsSvc = s
		}
	}
	if metricsSvc == nil {
		t.Fatal("no metrics Service in the build")
	}
	if !labels.SelectorFromSet(metricsSvc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) || len(metricsSvc.Spec.Selector) == 0 {
		t.Errorf("metrics Service selector %v does not select the manager pods %v", metricsSvc.Spec.Selector, d.Spec.Template.Labels)
	}
	if len(metricsSvc.Spec.Ports) != 1 || metricsSvc.Spec.Ports[0].TargetPort.IntValue() != metricsPort {
		t.Fatalf("metrics Service ports %v, want one port targeting %d", metricsSvc.Spec.Ports, metricsPort)
	}
	monitors := unstructuredOf(objs, "ServiceMonitor")
	if len(monitors) != 1 {
		t.Fatalf("want one ServiceMonitor, got %d", len(monitors))
	}
	sm := monitors[0]
	matchLabels, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(matchLabels) == 0 || !labels.SelectorFromSet(matchLabels).Matches(labels.Set(metricsSvc.Labels)) {
		t.Errorf("ServiceMonitor selector %v does not select the metrics Service (labels %v)", matchLabels, metricsSvc.Labels)
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints: %v", endpoints)
	}
	ep := endpoints[0].(map[string]any)
	if ep["port"] != metricsSvc.Spec.Ports[0].Name || ep["scheme"] != "https" {
		t.Errorf("ServiceMonitor endpoint %v does not scrape port %q over https", ep, metricsSvc.Spec.Ports[0].Name)
	}
	if sm.GetNamespace() != metricsSvc.Namespace {
		t.Errorf("ServiceMonitor is in %s, the Service in %s", sm.GetNamespace(), metricsSvc.Namespace)
	}
}

// TestServiceMonitorScrapesWithATokenFromASecret: the ServiceMonitor works
// under OpenShift user-workload monitoring, which refuses bearerTokenFile:
// it sends the token of a Secret in its own namespace, a service-account
// token Secret whose account is bound to the ClusterRole that may GET
// /metrics. It keeps no honorLabels: the series carry job_namespace.
func TestServiceMonitorScrapesWithATokenFromASecret(t *testing.T) {
	objs := buildAndDecode(t, "config/overlays/monitoring")
	sm := unstructuredOf(objs, "ServiceMonitor")[0]
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	require.Len(t, endpoints, 1)
	ep := endpoints[0].(map[string]any)
	for _, forbidden := range []string{"bearerTokenFile", "bearerTokenSecret", "honorLabels"} {
		if _, ok := ep[forbidden]; ok {
			t.Errorf("ServiceMonitor endpoint sets %s", forbidden)
		}
	}
	if tls, _, _ := unstructured.NestedMap(ep, "tlsConfig"); tls["caFile"] != nil || tls["certFile"] != nil || tls["keyFile"] != nil {
		t.Errorf("ServiceMonitor tlsConfig %v reads files from Prometheus' pod", tls)
	}
	authType, _, _ := unstructured.NestedString(ep, "authorization", "type")
	secretName, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name")
	secretKey, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "key")
	require.Equal(t, "Bearer", authType, "ServiceMonitor authorization type")

	var secret *corev1.Secret
	for _, s := range typedOf[*corev1.Secret](objs) {
		if s.Name == secretName && s.Namespace == sm.GetNamespace() {
			secret = s
		}
	}
	require.NotNil(t, secret, "the ServiceMonitor's Secret %s/%s is not in the build", sm.GetNamespace(), secretName)
	require.Equal(t, corev1.SecretTypeServiceAccountToken, secret.Type)
	require.Equal(t, corev1.ServiceAccountTokenKey, secretKey, "the token controller fills the key %q", corev1.ServiceAccountTokenKey)
	saName := secret.Annotations[corev1.ServiceAccountNameKey]
	sa := false
	for _, a := range typedOf[*corev1.ServiceAccount](objs) {
		sa = sa || (a.Name == saName && a.Namespace == secret.Namespace)
	}
	require.True(t, sa, "the token Secret names service account %s/%s, which is not in the build", secret.Namespace, saName)

	roles := map[string][]rbacv1.PolicyRule{}
	for _, r := range typedOf[*rbacv1.ClusterRole](objs) {
		roles[r.Name] = r.Rules
	}
	mayGetMetrics := false
	for _, b := range typedOf[*rbacv1.ClusterRoleBinding](objs) {
		for _, sub := range b.Subjects {
			if sub.Kind != rbacv1.ServiceAccountKind || sub.Name != saName || sub.Namespace != secret.Namespace {
				continue
			}
			for _, r := range roles[b.RoleRef.Name] {
				mayGetMetrics = mayGetMetrics || (slices.Contains(r.NonResourceURLs, "/metrics") && slices.Contains(r.Verbs, "get"))
			}
		}
	}
	require.True(t, mayGetMetrics, "service account %s is bound to no ClusterRole that may GET /metrics", saName)
}

func TestGrafanaDashboardConfigMap(t *testing.T) {
	objs := buildAndDecode(t, "config/grafana")
	cm := onlyOne[*corev1.ConfigMap](t, objs)
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v lack grafana_dashboard: \"1\"", cm.Labels)
	}
	if len(cm.Data) != 1 {
		t.Fatalf("dashboard ConfigMap has %d entries, want the one dashboard", len(cm.Data))
	}
	for name, data := range cm.Data {
		d, err := parseDashboard([]byte(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := []string{"Jobs by state", "Active workers", "Allocated GPUs", "Failures by reason", "Progress",
			"Gang restarts by reason", "Ready replicas by version", "Traffic weight by version", "Reconcile latency (p99)"}
		for _, title := range want {
			if _, ok := d.panelsByTitle[title]; !ok {
				t.Errorf("dashboard has no panel %q", title)
			}
		}
	}
}
