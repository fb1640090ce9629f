//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/localcluster"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// nonLoopbackAddresses lists every address the cluster hands out or reports
// (pods, host-network pods included, nodes, Services, Endpoints and
// EndpointSlices) that is outside 127.0.0.0/8. The local cluster's rule:
// nothing it runs may point this machine's traffic anywhere else.
func nonLoopbackAddresses(ctx context.Context, c client.Client) ([]string, error) {
	var bad []string
	check := func(what, addr string) {
		if addr != "" && addr != corev1.ClusterIPNone && !localcluster.IsLoopback(addr) {
			bad = append(bad, fmt.Sprintf("%s: %s", what, addr))
		}
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods); err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		what := "pod " + p.Namespace + "/" + p.Name
		check(what+" podIP", p.Status.PodIP)
		check(what+" hostIP", p.Status.HostIP)
		for _, ip := range p.Status.PodIPs {
			check(what+" podIPs", ip.IP)
		}
		for _, ip := range p.Status.HostIPs {
			check(what+" hostIPs", ip.IP)
		}
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return nil, err
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
				check("node "+n.Name+" "+string(a.Type), a.Address)
			}
		}
	}
	services := &corev1.ServiceList{}
	if err := c.List(ctx, services); err != nil {
		return nil, err
	}
	for _, s := range services.Items {
		what := "service " + s.Namespace + "/" + s.Name
		check(what+" clusterIP", s.Spec.ClusterIP)
		for _, ip := range append(append([]string{}, s.Spec.ClusterIPs...), s.Spec.ExternalIPs...) {
			check(what, ip)
		}
		for _, in := range s.Status.LoadBalancer.Ingress {
			check(what+" load balancer", in.IP)
		}
	}
	endpoints := &corev1.EndpointsList{} //nolint:staticcheck // the legacy API is still served and read by some tools
	if err := c.List(ctx, endpoints); err != nil {
		return nil, err
	}
	for _, e := range endpoints.Items {
		for _, s := range e.Subsets {
			for _, a := range append(append([]corev1.EndpointAddress{}, s.Addresses...), s.NotReadyAddresses...) {
				check("endpoints "+e.Namespace+"/"+e.Name, a.IP)
			}
		}
	}
	slices := &discoveryv1.EndpointSliceList{}
	if err := c.List(ctx, slices); err != nil {
		return nil, err
	}
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			for _, a := range ep.Addresses {
				check("endpointslice "+s.Namespace+"/"+s.Name, a)
			}
		}
	}
	return bad, nil
}

// TestEveryAddressIsLoopback runs a TrainingJob, a ModelDeployment (a
// Service with a ClusterIP) and a host-network pod, then checks every
// address in the cluster. The suite checks again once every test is done.
func TestEveryAddressIsLoopback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := namespace(t)
	tj := simJob(ns, "addresses", 2, 0, map[string]string{"sim.ml.example.com/complete-after": "1h"})
	require.NoError(t, env.client.Create(ctx, tj))
	md := testutil.ModelDeployment("addresses", ns).Version("v1", 100, "s3://models/addresses/v1").Obj()
	require.NoError(t, env.client.Create(ctx, md))
	host := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "host-network", Namespace: ns},
		Spec: corev1.PodSpec{
			HostNetwork: true,
			NodeName:    "cpu-node-0",
			Containers:  []corev1.Container{{Name: "c", Image: "example.com/agent:1"}},
		},
	}
	require.NoError(t, env.client.Create(ctx, host))

	waitState(t, tj, mlv1.StateRunning)
	waitModelServing(t, ns, md.Name, []string{md.Spec.Versions[0].Name}, 1)
	waitFor(t, 30*time.Second, "the host-network pod Running", func() (bool, string) {
		got := &corev1.Pod{}
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(host), got); err != nil {
			return false, err.Error()
		}
		return got.Status.Phase == corev1.PodRunning && got.Status.PodIP != "", fmt.Sprintf("%s %q", got.Status.Phase, got.Status.PodIP)
	})
	svc := &corev1.Service{}
	require.NoError(t, env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: md.Name}, svc))
	require.NotEmpty(t, svc.Spec.ClusterIP, "the ModelDeployment's Service has a ClusterIP to check")
	assert.True(t, env.cluster.Addresses().ServiceCIDR.Contains(mustAddr(t, svc.Spec.ClusterIP)), "ClusterIP %s from the cluster's Service range", svc.Spec.ClusterIP)
	for _, p := range workerPods(t, tj, "0") {
		assert.True(t, env.cluster.Addresses().PodCIDR.Contains(mustAddr(t, p.Status.PodIP)), "pod %s IP %s from the cluster's pod range", p.Name, p.Status.PodIP)
	}

	bad, err := nonLoopbackAddresses(ctx, env.client)
	require.NoError(t, err)
	assert.Empty(t, bad, "every address the local cluster hands out is in 127.0.0.0/8")
}

// TestSimulatedTrainerFillsProgress: the local cluster serves the progress
// contract on rank 0's loopback address, so the job's status fills in while
// it runs, as it would with a real trainer.
func TestSimulatedTrainerFillsProgress(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	tj := simJob(ns, "progress", 2, 0, map[string]string{"sim.ml.example.com/complete-after": "60s"})
	tj.Spec.Hyperparameters = map[string]mlv1.HyperparameterValue{"epochs": mlv1.NewHyperparameter(20)}
	require.NoError(t, env.client.Create(context.Background(), tj))

	var got *mlv1.TrainingJob
	waitFor(t, jobTimeout, "progress scraped from the simulated rank 0", func() (bool, string) {
		got = getJob(t, tj)
		return got.Status.State == mlv1.StateRunning && got.Status.CurrentEpoch > 0 && got.Status.Progress != "", describeJob(got)
	})
	c := meta.FindStatusCondition(got.Status.Conditions, "ProgressAvailable")
	require.NotNil(t, c, describeJob(got))
	assert.Equal(t, metav1.ConditionTrue, c.Status, describeJob(got))
	assert.EqualValues(t, 20, got.Status.TotalEpochs)
	assert.Less(t, got.Status.CurrentEpoch, int32(20), "read while the job runs, not filled in at completion")
	require.NotNil(t, got.Status.Metrics, describeJob(got))

	out := kubectl(t, "get", "tj", tj.Name, "-n", ns, "--no-headers", "-o", "custom-columns=STATE:.status.state,PROGRESS:.status.progress,EPOCH:.status.currentEpoch")
	fields := strings.Fields(out)
	require.Len(t, fields, 3, out)
	assert.Equal(t, "Running", fields[0], out)
	assert.NotEqual(t, "<none>", fields[1], "kubectl get shows PROGRESS: %s", out)
	assert.NotEqual(t, "<none>", fields[2], "kubectl get shows EPOCH: %s", out)
}

// TestWithoutTrainerTheScrapeFails: with the simulated trainer switched off
// nothing listens on rank 0's address; the scrape is refused at once and the
// job says so, and still runs.
func TestWithoutTrainerTheScrapeFails(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	tj := simJob(ns, "no-progress", 1, 0, map[string]string{
		"sim.ml.example.com/complete-after": "1h",
		localcluster.SimMetricsAnnotation:   "off",
	})
	require.NoError(t, env.client.Create(context.Background(), tj))

	var got *mlv1.TrainingJob
	waitFor(t, jobTimeout, "ProgressAvailable=False", func() (bool, string) {
		got = getJob(t, tj)
		return meta.IsStatusConditionFalse(got.Status.Conditions, "ProgressAvailable"), describeJob(got)
	})
	c := meta.FindStatusCondition(got.Status.Conditions, "ProgressAvailable")
	assert.Equal(t, "ScrapeFailed", c.Reason)
	pod := workerPods(t, tj, "0")[0]
	assert.Contains(t, c.Message, "http://"+pod.Status.PodIP+":8000/metrics", "the scrape went to rank 0's loopback address")
	assert.Contains(t, c.Message, "connection refused")
	assert.Equal(t, mlv1.StateRunning, got.Status.State, "a failed scrape never changes the job's state")
	assert.Zero(t, got.Status.CurrentEpoch)
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	require.NoError(t, err)
	return a
}
