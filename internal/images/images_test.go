package images

import (
	"archive/tar"
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o755))
	return p
}

func TestLocalRefKeepsTheRepositoryPath(t *testing.T) {
	for ref, want := range map[string]string{
		"ghcr.io/ml-operator/ml-operator:v0.2.0": "127.0.0.1:5000/ml-operator/ml-operator:v0.2.0",
		"busybox:1":                              "127.0.0.1:5000/library/busybox:1",
		"realnode.local/pause:v1":                "127.0.0.1:5000/pause:v1",
	} {
		got, err := LocalRef("127.0.0.1:5000", ref)
		require.NoError(t, err)
		require.Equal(t, want, got.String(), ref)
	}
}

func TestKeyFollowsTheInputs(t *testing.T) {
	dir := t.TempDir()
	bin := writeFile(t, dir, "app", "one")
	s := Spec{Ref: "example.com/app:1", Files: []File{{Source: bin, Path: "/app"}}, Entrypoint: []string{"/app"}}
	k1, err := s.Key()
	require.NoError(t, err)
	k2, err := s.Key()
	require.NoError(t, err)
	require.Equal(t, k1, k2)

	writeFile(t, dir, "app", "two")
	k3, err := s.Key()
	require.NoError(t, err)
	require.NotEqual(t, k1, k3, "a changed binary is a new image")

	s.Entrypoint = []string{"/app", "--flag"}
	k4, err := s.Key()
	require.NoError(t, err)
	require.NotEqual(t, k3, k4, "a changed config is a new image")

	s.Ref = "example.com/other:2"
	k5, err := s.Key()
	require.NoError(t, err)
	require.Equal(t, k4, k5, "the same image under another name is built once")
}

func TestBuildCachePushAndPullBack(t *testing.T) {
	dir := t.TempDir()
	bin := writeFile(t, dir, "app", "#!/bin/true\n")
	s := Spec{
		Ref:        "ghcr.io/ml-operator/app:test",
		Files:      []File{{Source: bin, Path: "/usr/local/bin/app"}},
		Entrypoint: []string{"/usr/local/bin/app"},
		Env:        []string{"A=1"},
		User:       "65532:65532",
	}
	cache := Cache{Dir: filepath.Join(dir, "cache")}
	img, err := cache.Image(s)
	require.NoError(t, err)
	key, err := s.Key()
	require.NoError(t, err)
	require.DirExists(t, filepath.Join(cache.Dir, "images", key))
	again, err := cache.Image(s)
	require.NoError(t, err)
	d1, err := img.Digest()
	require.NoError(t, err)
	d2, err := again.Digest()
	require.NoError(t, err)
	require.Equal(t, d1, d2, "the cached image is the built one")

	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	require.NoError(t, Push(context.Background(), addr, s.Ref, img))

	ref, err := name.ParseReference(addr+"/ml-operator/app:test", name.Insecure)
	require.NoError(t, err)
	pulled, err := remote.Image(ref)
	require.NoError(t, err)
	pd, err := pulled.Digest()
	require.NoError(t, err)
	require.Equal(t, d1, pd)
	cf, err := pulled.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, []string{"/usr/local/bin/app"}, cf.Config.Entrypoint)
	require.Equal(t, "65532:65532", cf.Config.User)
	require.Contains(t, cf.Config.Env, "A=1")
	require.Equal(t, "linux", cf.OS)
	require.Equal(t, "amd64", cf.Architecture)

	layers, err := pulled.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			files[h.Name] = string(b)
			require.Equal(t, int64(0o755), h.Mode)
		}
	}
	require.Equal(t, map[string]string{"usr/local/bin/app": "#!/bin/true\n"}, files)
}

func TestGoBinaryIsStatic(t *testing.T) {
	out := filepath.Join(t.TempDir(), "pause")
	require.NoError(t, GoBinary(context.Background(), "../..", "./internal/realnode/pause", out))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	// A dynamically linked ELF names its interpreter (ld-linux); a static
	// one, which runs in an image with nothing else, does not.
	require.True(t, strings.HasPrefix(string(b[:4]), "\x7fELF"))
	require.NotContains(t, string(b), "/lib64/ld-linux")
}

// A file's DirMode is given to the parent directories it creates; the
// directories other files created first keep theirs.
func TestFilesTarDirMode(t *testing.T) {
	dir := t.TempDir()
	src := writeFile(t, dir, "f", "x")
	data, err := filesTar([]File{
		{Source: src, Path: "/configs/a.yaml", Mode: 0o644},
		{Source: src, Path: "/tmp/cache/db/x", Mode: 0o660, DirMode: 0o770},
		{Source: src, Path: "/configs/b/c.yaml", Mode: 0o644, DirMode: 0o700},
	})
	require.NoError(t, err)
	modes := map[string]int64{}
	tr := tar.NewReader(strings.NewReader(string(data)))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		modes[h.Name] = h.Mode
	}
	require.Equal(t, map[string]int64{
		"configs/": 0o755, "configs/a.yaml": 0o644,
		"tmp/": 0o770, "tmp/cache/": 0o770, "tmp/cache/db/": 0o770, "tmp/cache/db/x": 0o660,
		"configs/b/": 0o700, "configs/b/c.yaml": 0o644,
	}, modes)
}
