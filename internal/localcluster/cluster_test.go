package localcluster

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/ml-operator/ml-operator/internal/manifests"
)

func TestServingCertVerifiesFor127001(t *testing.T) {
	dir := t.TempDir()
	cert, err := WriteServingCert(dir)
	require.NoError(t, err)

	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	require.NoError(t, err, "the manager loads tls.crt/tls.key from --webhook-cert-path")
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(cert.CABundle))
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: pool})
	assert.NoError(t, err, "the API server calls https://127.0.0.1:<port>")
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: "webhook-service.system.svc", Roots: pool})
	assert.Error(t, err, "the certificate is only for this machine")
}

func TestDefaultNodes(t *testing.T) {
	var gpuNodes, cpuNodes int
	var gpus int64
	for _, spec := range DefaultNodes() {
		n := spec.Node()
		assert.Equal(t, "fake", n.Annotations[KwokNodeAnnotation], n.Name)
		q := n.Status.Allocatable[GPUResource]
		if q.Value() == 0 {
			cpuNodes++
			assert.Empty(t, n.Spec.Taints, n.Name)
			assert.NotContains(t, n.Labels, GPUPresentLabel, n.Name)
			continue
		}
		gpuNodes++
		gpus += q.Value()
		assert.Equal(t, "true", n.Labels[GPUPresentLabel], n.Name)
		assert.NotEmpty(t, n.Labels[InstanceTypeLabel], n.Name)
		assert.Equal(t, []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}, n.Spec.Taints, n.Name)
	}
	assert.Equal(t, 4, gpuNodes)
	assert.Equal(t, 2, cpuNodes)
	assert.EqualValues(t, 32, gpus)
}

func TestNodeSpecAddsLabelsAndTaints(t *testing.T) {
	spec := GPUNode("pool-0", 8)
	spec.Labels = map[string]string{"e2e.ml.example.com/pool": "test-abc"}
	spec.Taints = []corev1.Taint{{Key: "e2e.ml.example.com/pool", Value: "test-abc", Effect: corev1.TaintEffectNoSchedule}}
	n := spec.Node()
	assert.Equal(t, "test-abc", n.Labels["e2e.ml.example.com/pool"])
	assert.Equal(t, "true", n.Labels[GPUPresentLabel], "the GPU labels stay")
	assert.Equal(t, []corev1.Taint{
		{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule},
		{Key: "e2e.ml.example.com/pool", Value: "test-abc", Effect: corev1.TaintEffectNoSchedule},
	}, n.Spec.Taints)
	assert.Len(t, spec.Taints, 1, "the spec is not changed")

	cpu := CPUNode("cpu-pool-0")
	cpu.Taints = spec.Taints
	assert.Equal(t, spec.Taints, cpu.Node().Spec.Taints, "a CPU node gets only the added taints")
}

const webhookManifest = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service:
      name: webhook-service
      namespace: system
      path: /validate-ml-example-com-v1-trainingjob
  failurePolicy: Fail
  name: vtrainingjob-v1.kb.io
  sideEffects: None
`

func TestLocalWebhookConfigUsesURLOn127001(t *testing.T) {
	obj := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(webhookManifest), &obj.Object))
	w := Webhook{Port: 40123, CABundle: []byte("PEM")}
	require.NoError(t, LocalWebhookConfig(obj, w))

	hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
	require.Len(t, hooks, 1)
	cc := hooks[0].(map[string]any)["clientConfig"].(map[string]any)
	assert.Equal(t, map[string]any{
		"url":      "https://127.0.0.1:40123/validate-ml-example-com-v1-trainingjob",
		"caBundle": base64.StdEncoding.EncodeToString([]byte("PEM")),
	}, cc, "the service reference is replaced: the manager runs on the host")
	assert.Equal(t, "Fail", hooks[0].(map[string]any)["failurePolicy"], "other fields are kept")
}

func TestLocalWebhookConfigRefusesOtherKinds(t *testing.T) {
	obj := &unstructured.Unstructured{}
	obj.SetKind("Service")
	obj.SetName("webhook-service")
	assert.ErrorContains(t, LocalWebhookConfig(obj, Webhook{Port: 1}), "not a webhook configuration")
}

func TestSetConversionWebhookOnlyOnMultiVersionCRDs(t *testing.T) {
	root := filepath.Join("..", "..")
	w := Webhook{Port: 40124, CABundle: []byte("PEM")}

	tj, err := manifests.Read(filepath.Join(root, CRDDir, "ml.example.com_trainingjobs.yaml"))
	require.NoError(t, err)
	require.NoError(t, SetConversionWebhook(tj[0], w))
	url, _, _ := unstructured.NestedString(tj[0].Object, "spec", "conversion", "webhook", "clientConfig", "url")
	assert.Equal(t, "https://127.0.0.1:40124/convert", url)
	strategy, _, _ := unstructured.NestedString(tj[0].Object, "spec", "conversion", "strategy")
	assert.Equal(t, "Webhook", strategy)

	md, err := manifests.Read(filepath.Join(root, CRDDir, "ml.example.com_modeldeployments.yaml"))
	require.NoError(t, err)
	require.NoError(t, SetConversionWebhook(md[0], w))
	_, found, _ := unstructured.NestedMap(md[0].Object, "spec", "conversion")
	assert.False(t, found, "ModelDeployment has one version and needs no conversion")
}

func TestStagesFileParses(t *testing.T) {
	objs, err := manifests.Read(filepath.Join("..", "..", StagesFile))
	require.NoError(t, err)
	names := map[string]bool{}
	kwokConfigs := 0
	for _, o := range objs {
		if o.GetKind() == "KwokConfiguration" {
			// The fallback for the file used on its own: loopback only.
			kwokConfigs++
			cidr, _, _ := unstructured.NestedString(o.Object, "options", "cidr")
			nodeIP, _, _ := unstructured.NestedString(o.Object, "options", "nodeIP")
			prefix, err := netip.ParsePrefix(cidr)
			require.NoError(t, err, "options.cidr")
			assert.True(t, Loopback.Contains(prefix.Addr()) && prefix.Bits() >= Loopback.Bits(), "options.cidr %s is not inside 127.0.0.0/8", cidr)
			assert.True(t, IsLoopback(nodeIP), "options.nodeIP %s", nodeIP)
			continue
		}
		assert.Equal(t, "Stage", o.GetKind())
		names[o.GetName()] = true
	}
	assert.Equal(t, 1, kwokConfigs, "one KwokConfiguration with loopback addresses")
	for _, want := range []string{"node-initialize", "node-heartbeat-with-lease", "pod-ready",
		"trainingjob-worker-complete", "trainingjob-worker-fail", "trainingjob-worker-evict", "pod-delete"} {
		assert.True(t, names[want], "stage %s", want)
	}
}

func TestFilterWebhooksKeepsOnlyServedPaths(t *testing.T) {
	obj := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(webhookManifest+`- admissionReviewVersions: [v1]
  clientConfig:
    service:
      name: webhook-service
      namespace: system
      path: /validate-ml-example-com-v1-modeldeployment
  name: vmodeldeployment-v1.kb.io
  sideEffects: None
`), &obj.Object))
	require.NoError(t, LocalWebhookConfig(obj, Webhook{Port: 1, CABundle: []byte("PEM")}))

	kept, dropped := FilterWebhooks(obj, func(path string) bool { return path == "/validate-ml-example-com-v1-modeldeployment" })
	assert.Equal(t, []string{"vmodeldeployment-v1.kb.io"}, kept)
	assert.Equal(t, []string{"/validate-ml-example-com-v1-trainingjob"}, dropped)
	hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
	require.Len(t, hooks, 1, "an unserved webhook would make the API server refuse every write it covers")
	assert.Equal(t, "vmodeldeployment-v1.kb.io", hooks[0].(map[string]any)["name"])
}

// The file kwokctl reads holds one KwokConfiguration, the cluster's own:
// the Stages file's fallback is left out, or kwok would use it instead.
func TestKwokConfigFileHasOnlyTheClustersAddresses(t *testing.T) {
	a := AddressesFor("/work/x", "c")
	path, err := a.writeKwokConfig(filepath.Join("..", ".."), t.TempDir(), false)
	require.NoError(t, err)
	objs, err := manifests.Read(path)
	require.NoError(t, err)
	var cidrs []string
	stages := 0
	for _, o := range objs {
		switch o.GetKind() {
		case "KwokConfiguration":
			cidr, _, _ := unstructured.NestedString(o.Object, "options", "cidr")
			cidrs = append(cidrs, cidr)
		case "Stage":
			stages++
		}
	}
	assert.Equal(t, []string{fmt.Sprintf("%s/%d", a.PodCIDR.Addr().Next(), a.PodCIDR.Bits())}, cidrs)
	assert.Positive(t, stages)
}

// With native gangs, kwokctl's options carry the feature gates (for every
// control-plane component) and the runtime config serving
// scheduling.k8s.io/v1alpha2; without, neither.
func TestKwokConfigNativeGangs(t *testing.T) {
	a := AddressesFor("/work/x", "c")
	for _, native := range []bool{true, false} {
		path, err := a.writeKwokConfig(filepath.Join("..", ".."), t.TempDir(), native)
		require.NoError(t, err)
		objs, err := manifests.Read(path)
		require.NoError(t, err)
		found := 0
		for _, o := range objs {
			if o.GetKind() != "KwokctlConfiguration" {
				continue
			}
			found++
			gates, _, _ := unstructured.NestedString(o.Object, "options", "kubeFeatureGates")
			runtimeConfig, _, _ := unstructured.NestedString(o.Object, "options", "kubeRuntimeConfig")
			bind, _, _ := unstructured.NestedString(o.Object, "options", "bindAddress")
			assert.Equal(t, NodeIP, bind)
			if native {
				assert.Equal(t, "GenericWorkload=true,GangScheduling=true", gates)
				assert.Equal(t, "scheduling.k8s.io/v1alpha2=true", runtimeConfig)
			} else {
				assert.Empty(t, gates)
				assert.Empty(t, runtimeConfig)
			}
			patches, _, _ := unstructured.NestedSlice(o.Object, "componentsPatches")
			assert.Len(t, patches, 4, "the component flags stay")
		}
		assert.Equal(t, 1, found)
	}
}
