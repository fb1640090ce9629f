// Package images builds container images without a container engine: a Go
// main package becomes a static binary, the binary (or a root filesystem
// tarball) becomes a layer, and the image is pushed to a registry on
// 127.0.0.1 under the repository path of the name it ships with. The real
// node's containerd resolves every registry host to that registry
// (internal/realnode), so a pod asking for ghcr.io/ml-operator/ml-operator:v0.2.0
// runs the image built here.
//
// Built images are cached outside the clone (Cache), keyed by their inputs:
// a warm run pushes layers the registry already has in no time, and a cold
// run builds everything.
package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one file of an image layer.
type File struct {
	// Source is the file on this machine.
	Source string
	// Path is where it goes in the image (absolute).
	Path string
	// Mode is its permission bits (0o755 when zero).
	Mode int64
	// DirMode is the permission bits of the parent directories this file
	// is the first to create (0o755 when zero): 0o770 for a directory a
	// non-root user of group 0 writes, as opm's serve cache is.
	DirMode int64 `json:",omitempty"`
}

// Spec describes an image: its name, its files and how it runs.
type Spec struct {
	// Ref is the name the image ships with, e.g.
	// ghcr.io/ml-operator/ml-operator:v0.2.0.
	Ref string
	// Files make up the image's one layer (besides RootfsTar).
	Files []File
	// RootfsTar, when set, is a tarball of a root filesystem (what
	// mmdebstrap writes) added as the image's first layer.
	RootfsTar string
	// Entrypoint, Cmd, Env, User and WorkingDir go into the image config.
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
}

// Key is a digest of everything the image is made of: the spec and the
// content of every input file. Two specs with the same key build the same
// image. The name is not part of it: one image pushed under several names
// (tags of the model server, the seeds' stand-ins) is built once.
func (s Spec) Key() (string, error) {
	h := sha256.New()
	unnamed := s
	unnamed.Ref = ""
	meta, err := json.Marshal(unnamed)
	if err != nil {
		return "", err
	}
	h.Write(meta)
	inputs := []string{}
	for _, f := range s.Files {
		inputs = append(inputs, f.Source)
	}
	if s.RootfsTar != "" {
		inputs = append(inputs, s.RootfsTar)
	}
	for _, p := range inputs {
		f, err := os.Open(p)
		if err != nil {
			return "", fmt.Errorf("image %s: %w", s.Ref, err)
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("image %s: reading %s: %w", s.Ref, p, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Cache keeps built images as OCI layouts in Dir/<key>; Dir is outside the
// clone (DefaultCacheDir).
type Cache struct{ Dir string }

// DefaultCacheDir is $XDG_CACHE_HOME/ml-operator, or ~/.cache/ml-operator.
func DefaultCacheDir() string {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "ml-operator")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".cache", "ml-operator")
	}
	return filepath.Join(os.TempDir(), "ml-operator-cache")
}

// Image returns the image the spec describes, from the cache when an image
// with the same key was built before, else built now and cached.
func (c Cache) Image(s Spec) (v1.Image, error) {
	key, err := s.Key()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.Dir, "images", key)
	if img, err := readLayout(dir); err == nil {
		return img, nil
	}
	img, err := Build(s)
	if err != nil {
		return nil, err
	}
	// Written next to its final place and renamed: a run killed half way
	// leaves no layout that looks complete.
	tmp := dir + ".tmp-" + fmt.Sprint(os.Getpid())
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("caching %s: %w", s.Ref, err)
	}
	if err := p.AppendImage(img); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("caching %s: %w", s.Ref, err)
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	return readLayout(dir)
}

func readLayout(dir string) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s: %d images, want 1", dir, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

// Build makes the image a spec describes: an optional root filesystem
// layer, then one layer with the files, on an empty linux/amd64 base.
func Build(s Spec) (v1.Image, error) {
	img := empty.Image
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	var layers []v1.Layer
	if s.RootfsTar != "" {
		l, err := tarball.LayerFromFile(s.RootfsTar,
			tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, fmt.Errorf("image %s: rootfs layer: %w", s.Ref, err)
		}
		layers = append(layers, l)
	}
	if len(s.Files) > 0 {
		data, err := filesTar(s.Files)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", s.Ref, err)
		}
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		}, tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", s.Ref, err)
		}
		layers = append(layers, l)
	}
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint = s.Entrypoint
	cf.Config.Cmd = s.Cmd
	cf.Config.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, s.Env...)
	cf.Config.User = s.User
	cf.Config.WorkingDir = s.WorkingDir
	// A fixed creation time: the same inputs give the same digest.
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	return mutate.ConfigFile(img, cf)
}

// filesTar is an uncompressed tar of the files, with their parent
// directories, owned by root, with a fixed modification time.
func filesTar(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	epoch := time.Unix(0, 0)
	for _, f := range files {
		if !filepath.IsAbs(f.Path) {
			return nil, fmt.Errorf("image path %q is not absolute", f.Path)
		}
		rel := strings.TrimPrefix(filepath.Clean(f.Path), "/")
		parts := strings.Split(rel, "/")
		for i := 1; i < len(parts); i++ {
			d := strings.Join(parts[:i], "/") + "/"
			if dirs[d] {
				continue
			}
			dirs[d] = true
			dirMode := f.DirMode
			if dirMode == 0 {
				dirMode = 0o755
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: dirMode, ModTime: epoch}); err != nil {
				return nil, err
			}
		}
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return nil, err
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// LocalRef is where an image named ref lives in the registry at addr
// (host:port on 127.0.0.1): the same repository path and tag, with the
// registry host replaced. containerd's mirror configuration sends a pull
// of ref to exactly that path.
func LocalRef(addr, ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("image name %q: %w", ref, err)
	}
	repo := r.Context().RepositoryStr()
	switch t := r.(type) {
	case name.Tag:
		return name.NewTag(addr+"/"+repo+":"+t.TagStr(), name.Insecure)
	case name.Digest:
		return name.NewDigest(addr+"/"+repo+"@"+t.DigestStr(), name.Insecure)
	}
	return nil, fmt.Errorf("image name %q: neither a tag nor a digest", ref)
}

// Push writes img to the registry at addr under ref's repository path and
// tag; blobs the registry already has are not sent again.
func Push(ctx context.Context, addr, ref string, img v1.Image) error {
	dst, err := LocalRef(addr, ref)
	if err != nil {
		return err
	}
	if err := remote.Write(dst, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("pushing %s to %s: %w", ref, dst, err)
	}
	return nil
}

// GoBinary builds the Go main package pkg (a path relative to dir, e.g.
// ./cmd) as a static linux/amd64 binary at out. Go's build cache makes an
// unchanged package cost only the check. The binary carries no version
// control stamp (-buildvcs=false): it depends on the source alone, not on
// the commit or on uncommitted files elsewhere, so the image digest a
// bundle pins (make bundle) stays the digest of the same source's build.
func GoBinary(ctx context.Context, dir, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", pkg, err, strings.TrimSpace(string(b)))
	}
	return nil
}
