package localcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/internal/manifests"
)

// CRDDir and WebhookManifests are relative to the repository root.
const (
	CRDDir           = "config/crd/bases"
	WebhookManifests = "config/webhook/manifests.yaml"
)

// Webhook says where the API server reaches the manager's webhook server.
type Webhook struct {
	// Port is the manager's --webhook-port on 127.0.0.1.
	Port int
	// CABundle verifies the manager's serving certificate.
	CABundle []byte
}

// URL is the webhook address for path.
func (w Webhook) URL(path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", w.Port, path)
}

// InstallCRDs applies every CRD in config/crd/bases and waits until each is
// Established. Conversion stays None until EnableConversionWebhook: the
// manager is not running yet when the CRDs go in.
func (c *Cluster) InstallCRDs(ctx context.Context) error {
	return c.installCRDs(ctx, nil)
}

// EnableConversionWebhook re-applies the CRDs with spec.conversion set to the
// manager's /convert endpoint.
func (c *Cluster) EnableConversionWebhook(ctx context.Context, w Webhook) error {
	return c.installCRDs(ctx, &w)
}

func (c *Cluster) installCRDs(ctx context.Context, conversion *Webhook) error {
	paths, err := filepath.Glob(filepath.Join(c.opts.RepoRoot, CRDDir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("no CRDs in %s: run `make manifests`", filepath.Join(c.opts.RepoRoot, CRDDir))
	}
	sort.Strings(paths)
	var names []string
	for _, p := range paths {
		objs, err := manifests.Read(p)
		if err != nil {
			return err
		}
		for _, crd := range objs {
			if conversion != nil {
				if err := SetConversionWebhook(crd, *conversion); err != nil {
					return err
				}
			}
			if err := c.apply(ctx, crd); err != nil {
				return err
			}
			names = append(names, crd.GetName())
		}
	}
	return c.WaitEstablished(ctx, names...)
}

// WaitEstablished waits up to 30 s for each named CRD to be Established.
// It reads the CRD itself: `kubectl wait --for=condition=Established` right
// after the CRD is created can fail at once, on a CRD whose status has no
// conditions yet.
func (c *Cluster) WaitEstablished(ctx context.Context, names ...string) error {
	for _, name := range names {
		if err := poll(ctx, 30*time.Second, func() (bool, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return false, nil
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}, "CRD "+name+" Established"); err != nil {
			return err
		}
	}
	return nil
}

// SetConversionWebhook points a multi-version CRD's conversion at the
// manager's /convert endpoint; single-version CRDs are left alone.
func SetConversionWebhook(crd *unstructured.Unstructured, w Webhook) error {
	versions, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if err != nil {
		return fmt.Errorf("CRD %s: spec.versions: %w", crd.GetName(), err)
	}
	if len(versions) < 2 {
		return nil
	}
	return unstructured.SetNestedMap(crd.Object, map[string]any{
		"strategy": "Webhook",
		"webhook": map[string]any{
			"conversionReviewVersions": []any{"v1"},
			"clientConfig": map[string]any{
				"url":      w.URL("/convert"),
				"caBundle": encodeBase64(w.CABundle),
			},
		},
	}, "spec", "conversion")
}

// HasWebhookManifests reports whether controller-gen has generated the
// webhook configurations yet.
func (c *Cluster) HasWebhookManifests() bool {
	_, err := os.Stat(filepath.Join(c.opts.RepoRoot, WebhookManifests))
	return err == nil
}

// InstallWebhooks applies config/webhook/manifests.yaml with every webhook's
// clientConfig turned into a URL on 127.0.0.1. Only the webhooks the
// manager really serves are installed: a configuration pointing at a path
// nobody serves would make the API server refuse every write it covers. It
// returns the installed webhooks' names and the paths it left out.
func (c *Cluster) InstallWebhooks(ctx context.Context, w Webhook) (installed, skipped []string, err error) {
	objs, err := manifests.Read(filepath.Join(c.opts.RepoRoot, WebhookManifests))
	if err != nil {
		return nil, nil, err
	}
	served := func(path string) bool {
		ok, err := ServesPath(ctx, w, path)
		return err == nil && ok
	}
	for _, obj := range objs {
		if err := LocalWebhookConfig(obj, w); err != nil {
			return nil, nil, err
		}
		kept, dropped := FilterWebhooks(obj, served)
		skipped = append(skipped, dropped...)
		if len(kept) == 0 {
			continue
		}
		if err := c.apply(ctx, obj); err != nil {
			return nil, nil, err
		}
		installed = append(installed, kept...)
	}
	return installed, skipped, nil
}

// FilterWebhooks keeps the webhooks of a local configuration (see
// LocalWebhookConfig) whose path served reports true. It returns the kept
// webhooks' names and the dropped paths.
func FilterWebhooks(obj *unstructured.Unstructured, served func(path string) bool) (kept, dropped []string) {
	hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
	var keep []any
	for _, h := range hooks {
		hook, _ := h.(map[string]any)
		raw, _, _ := unstructured.NestedString(hook, "clientConfig", "url")
		u, err := url.Parse(raw)
		if err != nil || !served(u.Path) {
			dropped = append(dropped, u.Path)
			continue
		}
		name, _, _ := unstructured.NestedString(hook, "name")
		kept = append(kept, name)
		keep = append(keep, hook)
	}
	_ = unstructured.SetNestedSlice(obj.Object, keep, "webhooks")
	return kept, dropped
}

// LocalWebhookConfig rewrites a Mutating- or ValidatingWebhookConfiguration
// so every webhook calls the manager at https://127.0.0.1:<port><path> (the
// path from its service reference) and trusts w.CABundle.
func LocalWebhookConfig(obj *unstructured.Unstructured, w Webhook) error {
	switch obj.GetKind() {
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
	default:
		return fmt.Errorf("%s: %s is not a webhook configuration", obj.GetName(), obj.GetKind())
	}
	hooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
	if err != nil {
		return fmt.Errorf("%s: webhooks: %w", obj.GetName(), err)
	}
	for i, h := range hooks {
		hook, ok := h.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: webhooks[%d] is not an object", obj.GetName(), i)
		}
		path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
		if path == "" {
			return fmt.Errorf("%s: webhooks[%d].clientConfig.service.path is empty", obj.GetName(), i)
		}
		hook["clientConfig"] = map[string]any{
			"url":      w.URL(path),
			"caBundle": encodeBase64(w.CABundle),
		}
		hooks[i] = hook
	}
	return unstructured.SetNestedSlice(obj.Object, hooks, "webhooks")
}

// ServesConversion reports whether the manager answers ConversionReviews on
// /convert (it does once the conversion webhook is registered).
func ServesConversion(ctx context.Context, w Webhook) (bool, error) {
	review := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "ConversionReview",
		"request":    map[string]any{"uid": "probe", "desiredAPIVersion": "ml.example.com/v1", "objects": []any{}},
	}
	code, err := post(ctx, w, "/convert", review)
	return code == http.StatusOK, err
}

// ServesPath reports whether the manager's webhook server has a handler on
// path: anything but 404 to an empty AdmissionReview.
func ServesPath(ctx context.Context, w Webhook, path string) (bool, error) {
	review := map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
	code, err := post(ctx, w, path, review)
	return err == nil && code != http.StatusNotFound, err
}

func post(ctx context.Context, w Webhook, path string, payload any) (int, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(w.CABundle) {
		return 0, errors.New("CA bundle holds no certificate")
	}
	hc := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL(path), bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func (c *Cluster) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	obj.SetResourceVersion("")
	if err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
		client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}
