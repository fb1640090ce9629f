package localcluster

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Node labels, taints and annotations the simulated nodes carry.
const (
	// KwokNodeAnnotation tells kwok to play the kubelet of a node.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// GPUPresentLabel is what NVIDIA's GPU feature discovery puts on GPU nodes.
	GPUPresentLabel = "nvidia.com/gpu.present"
	// GPUProductLabel names the GPU model (GPU feature discovery).
	GPUProductLabel = "nvidia.com/gpu.product"
	// GPUCountLabel is the number of GPUs (GPU feature discovery).
	GPUCountLabel = "nvidia.com/gpu.count"
	// InstanceTypeLabel is the well-known instance-type label.
	InstanceTypeLabel = "node.kubernetes.io/instance-type"
	// GPUTaintKey taints GPU nodes, as GPU node pools on the clouds do.
	GPUTaintKey = "nvidia.com/gpu"
	// GPUResource is the extended resource simulated GPUs are counted in.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
)

// NodeSpec describes one simulated node.
type NodeSpec struct {
	Name string
	// GPUs is the node's nvidia.com/gpu capacity; 0 makes a CPU node.
	GPUs int
	// CPU and Memory are the capacity ("32", "256Gi").
	CPU, Memory string
	// InstanceType goes to node.kubernetes.io/instance-type.
	InstanceType string
	// Labels and Taints are added to the node's own. A test that needs
	// nodes of its own (no other test's pods land there, its pods land
	// nowhere else) creates them labelled and tainted, in one write.
	Labels map[string]string
	Taints []corev1.Taint
}

// DefaultNodes are 4 GPU nodes with 8 GPUs each (32 GPUs in all) and 2 CPU nodes.
func DefaultNodes() []NodeSpec {
	var nodes []NodeSpec
	for i := range 4 {
		nodes = append(nodes, GPUNode(fmt.Sprintf("gpu-node-%d", i), 8))
	}
	for i := range 2 {
		nodes = append(nodes, CPUNode(fmt.Sprintf("cpu-node-%d", i)))
	}
	return nodes
}

// GPUNode is a node shaped like a cloud 8xA100 machine, with gpus GPUs.
func GPUNode(name string, gpus int) NodeSpec {
	return NodeSpec{Name: name, GPUs: gpus, CPU: "96", Memory: "1152Gi", InstanceType: "p4d.24xlarge"}
}

// CPUNode is a general-purpose node without GPUs.
func CPUNode(name string) NodeSpec {
	return NodeSpec{Name: name, CPU: "16", Memory: "64Gi", InstanceType: "m6i.4xlarge"}
}

// Node builds the Node object kwok will keep Ready.
func (n NodeSpec) Node() *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(n.CPU),
		corev1.ResourceMemory: resource.MustParse(n.Memory),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	labels := map[string]string{
		"kubernetes.io/hostname": n.Name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
		InstanceTypeLabel:        n.InstanceType,
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        n.Name,
			Labels:      labels,
			Annotations: map[string]string{KwokNodeAnnotation: "fake"},
		},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity.DeepCopy(),
			// kwok's node stage keeps addresses a node already has; pods'
			// hostIP (and host-network pods' podIP) are taken from here.
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: NodeIP},
				{Type: corev1.NodeHostName, Address: n.Name},
			},
		},
	}
	if n.GPUs > 0 {
		gpus := *resource.NewQuantity(int64(n.GPUs), resource.DecimalSI)
		node.Status.Capacity[GPUResource] = gpus
		node.Status.Allocatable[GPUResource] = gpus
		labels[GPUPresentLabel] = "true"
		labels[GPUProductLabel] = "NVIDIA-A100-SXM4-40GB"
		labels[GPUCountLabel] = fmt.Sprint(n.GPUs)
		node.Spec.Taints = []corev1.Taint{{Key: GPUTaintKey, Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	}
	maps.Copy(labels, n.Labels)
	node.Spec.Taints = append(node.Spec.Taints, n.Taints...)
	return node
}

// AddNodes creates the nodes and waits until kwok reports each one Ready.
func (c *Cluster) AddNodes(ctx context.Context, nodes ...NodeSpec) error {
	for _, n := range nodes {
		node := n.Node()
		want := node.DeepCopy()
		if err := c.Client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
		// The scheduler reads capacity from status. Make sure it is there
		// whether or not the create kept it (a merge patch cannot conflict
		// with kwok's own status updates).
		base := want.DeepCopy()
		base.Status = corev1.NodeStatus{}
		if err := c.Client.Status().Patch(ctx, want, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("setting capacity of node %s: %w", n.Name, err)
		}
	}
	for _, n := range nodes {
		if err := poll(ctx, time.Minute, func() (bool, error) {
			node := &corev1.Node{}
			if err := c.Client.Get(ctx, client.ObjectKey{Name: n.Name}, node); err != nil {
				return false, nil
			}
			return nodeReady(node), nil
		}, "node "+n.Name+" Ready"); err != nil {
			return err
		}
	}
	return nil
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
