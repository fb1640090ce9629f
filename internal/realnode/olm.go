package realnode

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/ml-operator/ml-operator/internal/images"
)

// OLM v0 (operator-lifecycle-manager) as its own quickstart manifests
// install it, with its images built here from its Go module (make
// olm-tools) under the names below. Only the names' repository paths and
// tags matter: containerd resolves every registry host to the local one.
const (
	// OLMVersion is the operator-lifecycle-manager module version the
	// binaries and manifests come from.
	OLMVersion = "v0.38.0"
	// OLMImage holds olm, catalog, copy-content, cpb and cp: the image
	// of both OLM Deployments and the catalog operator's --util-image, as
	// upstream's one olm image is.
	OLMImage = "quay.io/operator-framework/olm:" + OLMVersion
	// OPMImage holds opm and grpc_health_probe: the catalog operator's
	// --opmImage, and the base of catalog images (catalog.Dockerfile).
	OPMImage = "quay.io/operator-framework/opm:v1.60.0"
	// OLMNamespace is where the quickstart runs OLM's operators.
	OLMNamespace = "olm"
	// OLMManifestsPath is where OLM's module keeps its quickstart.
	OLMManifestsPath = "deploy/upstream/quickstart"
	// OLMConfigCRDPath is the OLMConfig CRD in OLM's module: the
	// quickstart's crds.yaml lacks it, and the olm-operator watches
	// OLMConfigs (without the CRD it logs a failed list every few seconds).
	OLMConfigCRDPath = "deploy/chart/crds/0000_50_olm_00-olmconfigs.crd.yaml"
)

// OLMOptions say where OLM's binaries and manifests are.
type OLMOptions struct {
	// BinDir holds olm, catalog, copy-content, cpb, grpc_health_probe and
	// a static opm (make olm-tools: bin/olm-v0.38.0).
	BinDir string
	// ModuleDir is the operator-lifecycle-manager module's source (its
	// deploy/upstream/quickstart has crds.yaml and olm.yaml).
	ModuleDir string
	// Busybox is a static busybox, installed as /bin/cp in the OLM image
	// (the bundle-unpack jobs and extract-content pods run cp from it).
	Busybox string
}

// InstallOLM builds and pushes OLM's images, applies OLM's CRDs and its
// quickstart (olm.yaml) adapted by OLMQuickstart, and returns once the
// olm-operator and catalog-operator Deployments are Available.
func (n *Node) InstallOLM(ctx context.Context, o OLMOptions) error {
	began := time.Now()
	bin := func(name string) string { return filepath.Join(o.BinDir, name) }
	if err := n.PushImage(ctx, images.Spec{
		Ref: OLMImage,
		Files: []images.File{
			{Source: bin("olm"), Path: "/bin/olm"},
			{Source: bin("catalog"), Path: "/bin/catalog"},
			{Source: bin("copy-content"), Path: "/bin/copy-content"},
			{Source: bin("cpb"), Path: "/bin/cpb"},
			{Source: o.Busybox, Path: "/bin/cp"},
		},
		Entrypoint: []string{"/bin/olm"},
		User:       "1001",
	}); err != nil {
		return err
	}
	if err := n.PushImage(ctx, OPMImageSpec(o.BinDir)); err != nil {
		return err
	}
	n.logf("OLM images %s and %s built and pushed (%s)", OLMImage, OPMImage, time.Since(began).Round(100*time.Millisecond))

	began = time.Now()
	dir := filepath.Join(o.ModuleDir, OLMManifestsPath)
	for _, f := range []string{filepath.Join(dir, "crds.yaml"), filepath.Join(o.ModuleDir, OLMConfigCRDPath)} {
		if err := n.applyFile(ctx, f); err != nil {
			return err
		}
	}
	if err := n.waitCRDsEstablished(ctx, "operators.coreos.com"); err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(dir, "olm.yaml"))
	if err != nil {
		return err
	}
	objs, err := OLMQuickstart(data)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, "olm.yaml"), err)
	}
	for _, u := range objs {
		if err := n.Client.Patch(ctx, u, client.Apply, client.FieldOwner("realnode"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s from OLM's olm.yaml: %w", u.GetKind(), u.GetName(), err)
		}
	}
	for _, name := range []string{"olm-operator", "catalog-operator"} {
		dep := &appsv1.Deployment{}
		if err := poll(ctx, 3*time.Minute, "OLM's "+name+" Available", func() (bool, error) {
			if err := n.Client.Get(ctx, client.ObjectKey{Namespace: OLMNamespace, Name: name}, dep); err != nil {
				return false, err
			}
			return deploymentAvailable(dep), fmt.Errorf("status %+v", dep.Status)
		}, n.kubelet); err != nil {
			return fmt.Errorf("%w\n%s", err, n.NamespaceDiagnostics(ctx, OLMNamespace))
		}
	}
	n.logf("OLM %s installed and its operators Available (%s)", OLMVersion, time.Since(began).Round(100*time.Millisecond))
	return nil
}

// OPMImageSpec is the opm image: opm serve and the health probe OLM's
// registry pods run.
func OPMImageSpec(binDir string) images.Spec {
	return images.Spec{
		Ref: OPMImage,
		Files: []images.File{
			{Source: filepath.Join(binDir, "opm"), Path: "/bin/opm"},
			{Source: filepath.Join(binDir, "grpc_health_probe"), Path: "/bin/grpc_health_probe"},
		},
		Entrypoint: []string{"/bin/opm"},
		User:       "1001",
	}
}

// OLMQuickstart reads OLM's olm.yaml and adapts it to the node, changing
// only what must change:
//   - the packageserver CSV and the operatorhubio CatalogSource are left
//     out (the aggregated PackageManifest API is not needed to subscribe,
//     and the community catalog is not reachable);
//   - every container image becomes OLMImage (upstream pins a digest of
//     its own build);
//   - the catalog operator's --util-image is OLMImage and its --opmImage is
//     OPMImage;
//   - the catalog operator's single-dash flags (upstream writes
//     `-namespace`) get two dashes: v0.38's catalog command parses its flags
//     with pflag, which reads `-namespace` as the shorthands n, a, m, ... and
//     exits ("unknown shorthand flag: 'n' in -namespace", found on the real
//     node).
func OLMQuickstart(data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		if len(u.Object) == 0 {
			continue
		}
		switch u.GetKind() {
		case "ClusterServiceVersion", "CatalogSource":
			continue
		case "Deployment":
			d, err := adaptOLMDeployment(u)
			if err != nil {
				return nil, err
			}
			u = d
		}
		out = append(out, u)
	}
	for _, want := range []string{"olm-operator", "catalog-operator"} {
		found := false
		for _, u := range out {
			found = found || (u.GetKind() == "Deployment" && u.GetName() == want)
		}
		if !found {
			return nil, fmt.Errorf("no Deployment %s", want)
		}
	}
	return out, nil
}

func adaptOLMDeployment(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
		return nil, fmt.Errorf("Deployment %s: %w", u.GetName(), err)
	}
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		c.Image = OLMImage
		if c.Name != "catalog-operator" {
			continue
		}
		var args []string
		for j := 0; j < len(c.Args); j++ {
			a := strings.TrimSpace(c.Args[j])
			if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 2 {
				a = "-" + a
			}
			switch {
			case a == "--util-image":
				j++ // its value follows
			case strings.HasPrefix(a, "--util-image="), strings.HasPrefix(a, "--opmImage"):
			default:
				args = append(args, a)
			}
		}
		c.Args = append(args, "--util-image="+OLMImage, "--opmImage="+OPMImage)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{Object: obj}
	out.SetAPIVersion("apps/v1")
	out.SetKind("Deployment")
	unstructured.RemoveNestedField(out.Object, "status")
	unstructured.RemoveNestedField(out.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(out.Object, "spec", "template", "metadata", "creationTimestamp")
	return out, nil
}

// CatalogImageSpec is a catalog image as catalog.Dockerfile builds it:
// the opm image with the file-based catalog at /configs and its serve
// cache (built now with the same opm, --cache-only) at /tmp/cache, running
// `opm serve /configs --cache-dir=/tmp/cache`. workdir receives the cache.
func CatalogImageSpec(ctx context.Context, ref, binDir, catalogDir, workdir string) (images.Spec, error) {
	s := OPMImageSpec(binDir)
	s.Ref = ref
	s.Cmd = []string{"serve", "/configs", "--cache-dir=/tmp/cache"}
	cache := filepath.Join(workdir, "cache")
	_ = os.RemoveAll(cache)
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "opm"), "serve", catalogDir, "--cache-dir="+cache, "--cache-only")
	if out, err := cmd.CombinedOutput(); err != nil {
		return s, fmt.Errorf("opm serve --cache-only %s: %w: %s", catalogDir, err, out)
	}
	for _, tree := range []struct{ src, dst string }{{catalogDir, "/configs"}, {cache, "/tmp/cache"}} {
		err := filepath.WalkDir(tree.src, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			rel, err := filepath.Rel(tree.src, p)
			if err != nil {
				return err
			}
			f := images.File{Source: p, Path: filepath.Join(tree.dst, rel), Mode: 0o644}
			if tree.dst == "/tmp/cache" {
				// opm opens its cache database read-write; the registry
				// pod runs as user 1001 of group 0, as upstream's does,
				// and opm gives its cache group write (0770/0660).
				f.Mode, f.DirMode = 0o660, 0o770
			}
			s.Files = append(s.Files, f)
			return nil
		})
		if err != nil {
			return s, err
		}
	}
	return s, nil
}

// OLMModuleDir is where the Go module cache holds the
// operator-lifecycle-manager module that hack/tools/olm pins (downloaded
// from the Go module proxy if it is not there yet).
func OLMModuleDir(ctx context.Context, repoRoot string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/operator-framework/operator-lifecycle-manager")
	cmd.Dir = filepath.Join(repoRoot, "hack", "tools", "olm")
	// hack/tools/olm is a workspace with the project (its go.work): no
	// -mod=mod there, and the module's go.sum is complete.
	cmd.Env = append(os.Environ(), "GONOSUMDB=github.com/operator-framework,k8s.io")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return "", fmt.Errorf("finding OLM's module (hack/tools/olm): %w: %s", err, strings.TrimSpace(string(stderr)))
	}
	return strings.TrimSpace(string(out)), nil
}

// BundleImageSpec is a bundle image as bundle.Dockerfile builds it: the
// files of dir/manifests and dir/metadata at /manifests and /metadata
// (OLM's unpack job copies them out with cpb).
func BundleImageSpec(ref, dir string) (images.Spec, error) {
	s := images.Spec{Ref: ref}
	for _, sub := range []string{"manifests", "metadata"} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			return s, fmt.Errorf("bundle image %s: %w", ref, err)
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			s.Files = append(s.Files, images.File{Source: filepath.Join(dir, sub, e.Name()), Path: "/" + sub + "/" + e.Name(), Mode: 0o644})
		}
	}
	if len(s.Files) == 0 {
		return s, fmt.Errorf("bundle image %s: %s has no manifests", ref, dir)
	}
	return s, nil
}

// WriteBundleFromCatalog writes the bundle directory of the olm.bundle
// named name in a rendered catalog file (opm render output): every object
// opm embedded as an olm.bundle.object property into out/manifests, one
// YAML file each, and annotations (the bundle's metadata/annotations.yaml)
// into out/metadata. The image it makes holds exactly what the catalog
// says the bundle holds.
func WriteBundleFromCatalog(catalogFile, name string, annotations []byte, out string) error {
	data, err := os.ReadFile(catalogFile)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []map[string]any
	found := false
	for {
		doc := map[string]any{}
		if err := dec.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("%s: %w", catalogFile, err)
		}
		if doc["schema"] != "olm.bundle" || doc["name"] != name {
			continue
		}
		found = true
		props, _ := doc["properties"].([]any)
		for _, p := range props {
			prop, _ := p.(map[string]any)
			if prop["type"] != "olm.bundle.object" {
				continue
			}
			value, _ := prop["value"].(map[string]any)
			enc, _ := value["data"].(string)
			raw, err := base64.StdEncoding.DecodeString(enc)
			if err != nil {
				return fmt.Errorf("%s: bundle %s: olm.bundle.object: %w", catalogFile, name, err)
			}
			obj := map[string]any{}
			if err := json.Unmarshal(raw, &obj); err != nil {
				return fmt.Errorf("%s: bundle %s: olm.bundle.object: %w", catalogFile, name, err)
			}
			objs = append(objs, obj)
		}
	}
	if !found {
		return fmt.Errorf("%s: no olm.bundle %s", catalogFile, name)
	}
	if len(objs) == 0 {
		return fmt.Errorf("%s: bundle %s embeds no objects (olm.bundle.object)", catalogFile, name)
	}
	for _, sub := range []string{"manifests", "metadata"} {
		if err := os.MkdirAll(filepath.Join(out, sub), 0o755); err != nil {
			return err
		}
	}
	for _, obj := range objs {
		u := unstructured.Unstructured{Object: obj}
		y, err := sigsyaml.Marshal(obj)
		if err != nil {
			return err
		}
		file := strings.ToLower(u.GetName() + "_" + u.GetKind() + ".yaml")
		if err := os.WriteFile(filepath.Join(out, "manifests", file), y, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(out, "metadata", "annotations.yaml"), annotations, 0o644)
}

// PushManagerImageFrom builds the manager (./cmd) of an earlier release
// from its source archive (a gzipped tar of the module's go.mod, go.sum and
// packages, as `git archive` makes it), with the modules it shares with the
// project at the project's versions where its own are older
// (raiseToProject), and pushes it as ref: the release's manager, for its
// bundle. An archive rather than the commit: a clone without history (a
// shallow CI checkout) still has it.
func (n *Node) PushManagerImageFrom(ctx context.Context, archive, ref string) error {
	src, err := os.MkdirTemp("", "ml-operator-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	if out, err := exec.CommandContext(ctx, "tar", "-xzf", archive, "-C", src).CombinedOutput(); err != nil {
		return fmt.Errorf("unpacking %s: %w: %s", archive, err, out)
	}
	name := strings.TrimSuffix(filepath.Base(archive), ".tar.gz")
	if err := n.raiseReleaseModules(src, name); err != nil {
		return err
	}
	bin := filepath.Join(n.opts.CacheDir, "bin", "manager-"+name)
	if err := images.GoBinary(ctx, src, "./cmd", bin); err != nil {
		return fmt.Errorf("the manager of %s: %w", name, err)
	}
	return n.PushImage(ctx, images.ManagerSpec(ref, bin))
}

// raiseReleaseModules rewrites the go.mod of the release unpacked in src
// with raiseToProject, and gives it the project's go.sum lines as well, so
// that it builds without asking the checksum database.
func (n *Node) raiseReleaseModules(src, release string) error {
	read := func(dir, name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
	rel, err := read(src, "go.mod")
	if err != nil {
		return err
	}
	proj, err := read(n.opts.RepoRoot, "go.mod")
	if err != nil {
		return err
	}
	mod, raised, err := raiseToProject(rel, proj)
	if err != nil {
		return fmt.Errorf("the go.mod of %s: %w", release, err)
	}
	relSum, err := read(src, "go.sum")
	if err != nil {
		return err
	}
	projSum, err := read(n.opts.RepoRoot, "go.sum")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), mod, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.sum"), mergeSums(relSum, projSum), 0o644); err != nil {
		return err
	}
	n.logf("the manager of %s builds with %d modules raised to the project's versions: %s", release, len(raised), strings.Join(raised, ", "))
	return nil
}
