package security_test

import (
	"flag"
	"io"
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ml-operator/ml-operator/internal/manager"
)

// servedPorts are the ports the manager listens on with the Deployment's
// args, parsed by the manager's own flag set: webhooks, metrics, probes.
// It also fails when the args turn off HTTPS for metrics.
func servedPorts(t *testing.T, c *corev1.Container) (webhook, metrics, probes int32) {
	t.Helper()
	opts := manager.NewOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.BindFlags(fs)
	require.NoError(t, fs.Parse(c.Args))
	port := func(addr string) int32 {
		_, p, err := net.SplitHostPort(addr)
		require.NoError(t, err, addr)
		n, err := strconv.ParseInt(p, 10, 32)
		require.NoError(t, err, addr)
		return int32(n)
	}
	require.True(t, opts.EnableWebhooks, "the Deployment turns the webhooks off")
	require.True(t, opts.MetricsSecure, "the Deployment serves metrics over plain HTTP")
	return int32(opts.WebhookPort), port(opts.MetricsAddr), port(opts.ProbeAddr)
}

// resolvePort is a NetworkPolicy port as a number: named ports are looked
// up in the manager container, as the network plugin does.
func resolvePort(t *testing.T, p *intstr.IntOrString, c *corev1.Container) int32 {
	t.Helper()
	require.NotNil(t, p, "a NetworkPolicy port without a port opens every port")
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	t.Fatalf("named port %q is not a port of the manager container", p.StrVal)
	return 0
}

// The manager's ingress, as config/default installs it: the NetworkPolicies
// that select the manager pods admit traffic only to the port the manager
// serves webhooks on (from anywhere: the API server's address is not known)
// and the one it serves metrics on (from namespaces only, never from any
// pod or address), both read from the Deployment's args. The probe port
// and everything else stay closed: a pod selected by an Ingress policy
// admits only what some policy allows.
func TestManagerIngressIsOnlyWebhookAndMetrics(t *testing.T) {
	objs := kustomizeBuild(t, "config/default")
	ds := typed[appsv1.Deployment](t, objs, "Deployment")
	require.Len(t, ds, 1)
	pod := ds[0].Spec.Template
	c := managerContainer(t, &pod.Spec)
	webhook, metrics, probes := servedPorts(t, c)
	assert.NotEqual(t, probes, webhook)
	assert.NotEqual(t, probes, metrics)

	open := map[int32]bool{}
	selecting := 0
	for _, np := range typed[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy") {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		require.NoError(t, err)
		if !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		selecting++
		assert.NotZerof(t, np.Spec.PodSelector.Size(), "NetworkPolicy %s selects every pod of the namespace", np.Name)
		assert.Containsf(t, np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress, "NetworkPolicy %s", np.Name)
		for i, rule := range np.Spec.Ingress {
			require.NotEmptyf(t, rule.Ports, "NetworkPolicy %s ingress rule %d opens every port", np.Name, i)
			for _, p := range rule.Ports {
				assert.Nilf(t, p.EndPort, "NetworkPolicy %s opens a port range", np.Name)
				if p.Protocol != nil {
					assert.Equal(t, corev1.ProtocolTCP, *p.Protocol)
				}
				n := resolvePort(t, p.Port, c)
				open[n] = true
				switch n {
				case webhook:
				case metrics:
					require.NotEmptyf(t, rule.From, "NetworkPolicy %s opens the metrics port to everyone", np.Name)
					for _, peer := range rule.From {
						assert.Truef(t, peer.NamespaceSelector != nil && peer.NamespaceSelector.Size() > 0 && peer.PodSelector == nil && peer.IPBlock == nil,
							"NetworkPolicy %s admits metrics from %v, want labelled namespaces only", np.Name, peer)
					}
				default:
					t.Errorf("NetworkPolicy %s opens port %d; the manager serves webhooks on %d and metrics on %d", np.Name, n, webhook, metrics)
				}
			}
		}
	}
	require.NotZero(t, selecting, "no NetworkPolicy selects the manager pods: all ingress is open")
	assert.Equal(t, map[int32]bool{webhook: true, metrics: true}, open)
}
