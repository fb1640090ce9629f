//go:build smoke

package realnode

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/ml-operator/ml-operator/internal/images"
)

func TestSmokeContainerdPull(t *testing.T) {
	ctx := context.Background()
	w := t.TempDir()
	n := &Node{opts: Options{RepoRoot: "../..", BinDir: "/tmp/rnbin", Workdir: w, CacheDir: filepath.Join(w, "cache"), Log: os.Stderr}}
	n.Images = images.Cache{Dir: n.opts.CacheDir}
	n.opts.RepoRoot, _ = filepath.Abs("../..")
	defer func() {
		for i := len(n.procs) - 1; i >= 0; i-- {
			n.procs[i].stop(5 * time.Second)
		}
		t.Log(sweep(ctx, w, netnsNames()))
	}()
	if err := n.startRegistry(ctx); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := n.PushImage(ctx, images.Spec{Ref: CoreDNSImage, Files: []images.File{{Source: "/tmp/rnbin/coredns", Path: "/coredns"}}, Entrypoint: []string{"/coredns"}}); err != nil {
		t.Fatal(err)
	}
	t.Logf("coredns image %s", time.Since(began))
	began = time.Now()
	if err := n.pushNodeImages(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("node images (warm coredns) %s", time.Since(began))
	if err := n.startContainerd(ctx); err != nil {
		b, _ := os.ReadFile(filepath.Join(w, "logs", "containerd.log"))
		t.Fatalf("%v\n%s", err, b)
	}
	conn, closeConn, err := criClient(n.containerd.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer closeConn()
	_ = conn
	ic, err := imageClient(n.containerd.Socket)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{PauseImage, CoreDNSImage, "docker.io/library/nothere:1", "example.org/x/y:1"} {
		r, err := ic.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		t.Logf("pull %s: %v %v", ref, r, err)
	}
	st, err := conn.Status(ctx, &runtimeapi.StatusRequest{})
	t.Logf("status %v %v", st, err)
	b, _ := os.ReadFile(filepath.Join(w, "logs", "registry.log"))
	t.Logf("registry log:\n%s", b)
}

func TestSmokeTorchRootfs(t *testing.T) {
	c := images.Cache{Dir: images.DefaultCacheDir()}
	began := time.Now()
	p, err := c.Tarball(context.Background(), TrainerRootfs)
	t.Log(p, err, time.Since(began))
}
