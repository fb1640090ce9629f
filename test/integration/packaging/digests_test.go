package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/internal/images"
	"github.com/ml-operator/ml-operator/internal/realnode"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// projectImageRef matches a reference to an image the project builds (the
// manager, the storage initializer, the bundle, the model server: every
// repository under ghcr.io/ml-operator/), with its tag and digest if any.
var projectImageRef = regexp.MustCompile(`ghcr\.io/ml-operator/[a-z0-9][a-z0-9._/-]*(?::[A-Za-z0-9_][A-Za-z0-9_.-]*)?(?:@sha256:[0-9a-f]{64})?`)

// tagOnlyProjectImages lists the references in text to images the project
// builds that do not name a digest.
func tagOnlyProjectImages(text string) []string {
	var out []string
	for _, ref := range projectImageRef.FindAllString(text, -1) {
		if !strings.Contains(ref, "@sha256:") {
			out = append(out, ref)
		}
	}
	return out
}

// releasedWithTags are catalog bundles released before images were pinned
// by digest. A released catalog entry is never rendered again
// (docs/decisions.md): 0.1.0 keeps the tags it was released with.
var releasedWithTags = map[string]bool{"ml-operator.v0.1.0": true}

func TestTagOnlyProjectImagesFindsTags(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	text := `image: ghcr.io/ml-operator/ml-operator:v0.2.0
value: ghcr.io/ml-operator/storage-initializer@` + digest + `
"image":"ghcr.io/ml-operator/ml-operator-bundle:v0.2.0@` + digest + `"
- ghcr.io/ml-operator/model-server
- docker.io/pytorch/pytorch:2.5.1
- https://github.com/ml-operator/ml-operator`
	assert.Equal(t, []string{"ghcr.io/ml-operator/ml-operator:v0.2.0", "ghcr.io/ml-operator/model-server"}, tagOnlyProjectImages(text))
}

// TestProjectImagesArePinnedByDigest: the CSV (bundle/) and every catalog
// bundle name the images the project builds by digest, in the Deployment,
// its RELATED_IMAGE_* variables, relatedImages, the containerImage
// annotation and the catalog's bundle image, so a disconnected cluster can
// mirror them (make bundle and make catalog-add pin them).
func TestProjectImagesArePinnedByDigest(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(bundleDir(), "manifests"))
	require.NoError(t, err)
	found := 0
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(bundleDir(), "manifests", e.Name()))
		require.NoError(t, err)
		found += len(projectImageRef.FindAllString(string(data), -1))
		assert.Empty(t, tagOnlyProjectImages(string(data)), "bundle/manifests/%s names images the project builds without a digest: run make bundle", e.Name())
	}
	// The manager and the storage initializer, each in the Deployment or
	// its variables and in relatedImages.
	assert.GreaterOrEqual(t, found, 4, "the CSV names fewer images of the project than expected")

	cfg, _ := loadCatalog(t)
	require.NotEmpty(t, cfg.Bundles)
	for _, b := range cfg.Bundles {
		texts := []string{b.Image}
		for _, ri := range b.RelatedImages {
			texts = append(texts, ri.Image)
		}
		texts = append(texts, b.CsvJSON)
		texts = append(texts, b.Objects...)
		tags := tagOnlyProjectImages(strings.Join(texts, "\n"))
		if releasedWithTags[b.Name] {
			assert.NotEmpty(t, tags, "%s is listed as released with tags but has none: drop it from releasedWithTags", b.Name)
			continue
		}
		assert.Empty(t, tags, "catalog bundle %s names images the project builds without a digest: run make catalog-add", b.Name)
		assert.Regexp(t, `^ghcr\.io/ml-operator/ml-operator-bundle@sha256:[0-9a-f]{64}$`, b.Image, "catalog bundle %s's image", b.Name)
	}
}

// TestCatalogBundleImagesAreTheirContent: the digest a catalog bundle
// names for its bundle image is the digest of the image holding what the
// catalog renders for it (as the real node builds it, and `make
// catalog-add` computes it), with bundle/'s annotations.
func TestCatalogBundleImagesAreTheirContent(t *testing.T) {
	annotations, err := os.ReadFile(filepath.Join(bundleDir(), "metadata", "annotations.yaml"))
	require.NoError(t, err)
	cfg, _ := loadCatalog(t)
	checked := 0
	for _, b := range cfg.Bundles {
		if releasedWithTags[b.Name] {
			continue
		}
		file := filepath.Join(testutil.RepoRoot(), "catalog", packageName, "bundle-v"+strings.TrimPrefix(b.Name, packageName+".v")+".yaml")
		dir := t.TempDir()
		require.NoError(t, realnode.WriteBundleFromCatalog(file, b.Name, annotations, dir))
		spec, err := realnode.BundleImageSpec(b.Image, dir)
		require.NoError(t, err)
		digest, err := images.Digest(spec)
		require.NoError(t, err)
		assert.Equal(t, "ghcr.io/ml-operator/ml-operator-bundle@"+digest, b.Image, "catalog bundle %s: run make catalog-add", b.Name)
		checked++
	}
	assert.NotZero(t, checked)
}
