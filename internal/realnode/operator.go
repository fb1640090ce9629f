package realnode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/internal/certmanager"
	"github.com/ml-operator/ml-operator/internal/images"
)

// The operator as config/default installs it.
const (
	// ManagerImage is the image the Makefile's IMG names.
	ManagerImage = "ghcr.io/ml-operator/ml-operator:v0.2.0"
	// OperatorNamespace and ManagerDeployment are config/default's.
	OperatorNamespace = "ml-operator-system"
	ManagerDeployment = "ml-operator-controller-manager"
)

// DeployOperator installs the operator on the node the way a user does:
// the manager image built from ./cmd under its shipped name, cert-manager
// (its CRDs, and its controllers and CA injector running in this process
// until ctx ends), then `make deploy` of config/default with the
// repository's kubectl. It returns once the manager Deployment is
// Available; done closes when cert-manager has stopped after ctx ended.
func (n *Node) DeployOperator(ctx context.Context) (done <-chan struct{}, err error) {
	return n.DeployOperatorWith(ctx, OperatorOptions{})
}

// OperatorOptions change what DeployOperatorWith installs.
type OperatorOptions struct {
	// DeployDir is `make deploy`'s DEPLOY_DIR, relative to the repository
	// root: an overlay of config/default (config/default when empty).
	DeployDir string
}

// DeployOperatorWith is DeployOperator with `make deploy
// DEPLOY_DIR=o.DeployDir`.
func (n *Node) DeployOperatorWith(ctx context.Context, o OperatorOptions) (done <-chan struct{}, err error) {
	began := time.Now()
	if err := n.PushManagerImage(ctx, ManagerImage); err != nil {
		return nil, err
	}
	n.logf("Manager image %s built and pushed (%s)", ManagerImage, time.Since(began).Round(100*time.Millisecond))
	// The manager's --storage-initializer-image default: the init
	// container of ModelDeployment versions whose modelPath is fetched.
	began = time.Now()
	if err := n.PushStorageInitializer(ctx); err != nil {
		return nil, err
	}
	n.logf("Storage initializer image built and pushed (%s)", time.Since(began).Round(100*time.Millisecond))

	files, err := certmanager.CRDFiles(n.opts.RepoRoot)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := n.applyFile(ctx, f); err != nil {
			return nil, err
		}
	}
	if err := n.waitCRDsEstablished(ctx, "cert-manager.io"); err != nil {
		return nil, err
	}
	n.logf("Starting cert-manager's controllers and CA injector")
	if done, err = certmanager.Run(ctx, n.Kubeconfig); err != nil {
		return nil, err
	}

	began = time.Now()
	args := []string{"--no-print-directory", "deploy", "IMG=" + ManagerImage, "DEPLOY_KUBECTL=" + filepath.Join(n.opts.BinDir, "kubectl")}
	if o.DeployDir != "" {
		args = append(args, "DEPLOY_DIR="+o.DeployDir)
	}
	n.logf("make %s", strings.Join(args[1:], " "))
	cmd := exec.CommandContext(ctx, "make", args...)
	cmd.Dir = n.opts.RepoRoot
	cmd.Env = append(os.Environ(), "KUBECONFIG="+n.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		return done, fmt.Errorf("make deploy: %w\n%s", err, out)
	}
	dep := &appsv1.Deployment{}
	if err := poll(ctx, 3*time.Minute, "the manager Deployment Available", func() (bool, error) {
		if err := n.Client.Get(ctx, client.ObjectKey{Namespace: OperatorNamespace, Name: ManagerDeployment}, dep); err != nil {
			return false, err
		}
		return deploymentAvailable(dep), fmt.Errorf("status %+v", dep.Status)
	}, n.kubelet); err != nil {
		return done, fmt.Errorf("%w\n%s", err, n.OperatorDiagnostics(ctx))
	}
	n.logf("Operator deployed and Available (%s)", time.Since(began).Round(100*time.Millisecond))
	return done, nil
}

// deploymentAvailable is what `kubectl get deployment` and `kubectl wait
// --for=condition=Available` show as available: the Deployment's own
// Available condition, and every replica updated and available. One
// available replica of two is not (with maxUnavailable 25 % of 2, the
// condition stays False until both are).
func deploymentAvailable(dep *appsv1.Deployment) bool {
	want := ptr.Deref(dep.Spec.Replicas, 1)
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return dep.Status.AvailableReplicas == want && dep.Status.UpdatedReplicas == want
		}
	}
	return false
}

// PushManagerImage builds the manager from ./cmd into an image named ref
// and pushes it.
func (n *Node) PushManagerImage(ctx context.Context, ref string) error {
	bin := filepath.Join(n.opts.CacheDir, "bin", "manager")
	if err := images.GoBinary(ctx, n.opts.RepoRoot, "./cmd", bin); err != nil {
		return err
	}
	return n.PushImage(ctx, images.ManagerSpec(ref, bin))
}

// OperatorDiagnostics describes the manager pods (state, last lines of
// log) and the events of the operator namespace.
func (n *Node) OperatorDiagnostics(ctx context.Context) string {
	return n.NamespaceDiagnostics(ctx, OperatorNamespace)
}

// NamespaceDiagnostics describes the pods of ns (state, last lines of
// log) and its events.
func (n *Node) NamespaceDiagnostics(ctx context.Context, ns string) string {
	var b strings.Builder
	pods := &corev1.PodList{}
	_ = n.Client.List(ctx, pods, client.InNamespace(ns))
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s: %s\n", p.Name, p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "  %s ready=%t restarts=%d state=%+v last=%+v\n", c.Name, c.Ready, c.RestartCount, c.State, c.LastTerminationState)
		}
		if log, err := n.PodLog(ctx, ns, p.Name); err == nil {
			if len(log) > 3000 {
				log = log[len(log)-3000:]
			}
			fmt.Fprintf(&b, "  log:\n%s\n", log)
		}
	}
	events := &corev1.EventList{}
	_ = n.Client.List(ctx, events, client.InNamespace(ns))
	for _, e := range events.Items {
		fmt.Fprintf(&b, "event %s %s: %s\n", e.InvolvedObject.Name, e.Reason, e.Message)
	}
	return b.String()
}

// applyFile applies every object of a YAML file server-side.
func (n *Node) applyFile(ctx context.Context, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := n.Client.Patch(ctx, u, client.Apply, client.FieldOwner("realnode"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s from %s: %w", u.GetKind(), u.GetName(), path, err)
		}
	}
}

func (n *Node) waitCRDsEstablished(ctx context.Context, group string) error {
	return poll(ctx, time.Minute, "CRDs of "+group+" Established", func() (bool, error) {
		list := &apiextensionsv1.CustomResourceDefinitionList{}
		if err := n.Client.List(ctx, list); err != nil {
			return false, err
		}
		for _, crd := range list.Items {
			if crd.Spec.Group != group {
				continue
			}
			established := false
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return false, fmt.Errorf("%s not Established", crd.Name)
			}
		}
		return true, nil
	})
}
