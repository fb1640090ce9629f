package realnode

import (
	"context"
	"path/filepath"

	"github.com/ml-operator/ml-operator/internal/images"
	"github.com/ml-operator/ml-operator/internal/storageinit"
)

// ModelServerImage is the project's model server (./cmd/model-server) under
// the name it ships with.
const ModelServerImage = "ghcr.io/ml-operator/model-server:v0.2.0"

// ModelServerUser is the numeric non-root user the model server image runs
// as: a ModelDeployment's pods are "restricted" (runAsNonRoot), which needs
// a number the kubelet can check.
const ModelServerUser = "65532:65532"

// PushModelServer builds ./cmd/model-server as a static binary and pushes
// it under each of refs (ModelServerImage when none): tags of one build,
// for a ModelDeployment whose versions name different images.
func (n *Node) PushModelServer(ctx context.Context, refs ...string) error {
	if len(refs) == 0 {
		refs = []string{ModelServerImage}
	}
	bin, err := n.modelServerBinary(ctx)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		if err := n.PushImage(ctx, modelServerSpec(ref, bin)); err != nil {
			return err
		}
	}
	return nil
}

// PushModelServerWithEnv builds ./cmd/model-server and pushes it as ref
// with env (NAME=value) in the image config: a version that misbehaves
// from its image alone (FAIL_RATE=0.2, READY=false), since a
// ModelDeployment sets no per-version environment.
func (n *Node) PushModelServerWithEnv(ctx context.Context, ref string, env ...string) error {
	bin, err := n.modelServerBinary(ctx)
	if err != nil {
		return err
	}
	s := modelServerSpec(ref, bin)
	s.Env = env
	return n.PushImage(ctx, s)
}

func (n *Node) modelServerBinary(ctx context.Context) (string, error) {
	bin := filepath.Join(n.opts.CacheDir, "bin", "model-server")
	return bin, images.GoBinary(ctx, n.opts.RepoRoot, "./cmd/model-server", bin)
}

func modelServerSpec(ref, bin string) images.Spec {
	return images.Spec{
		Ref:        ref,
		Files:      []images.File{{Source: bin, Path: "/model-server"}},
		Entrypoint: []string{"/model-server"},
		User:       ModelServerUser,
	}
}

// PushStorageInitializer builds ./cmd/storage-initializer as a static
// binary and pushes it under the name the manager's
// --storage-initializer-image defaults to (storageinit.DefaultImage): the
// init container of every ModelDeployment version whose modelPath is
// fetched.
func (n *Node) PushStorageInitializer(ctx context.Context) error {
	bin := filepath.Join(n.opts.CacheDir, "bin", "storage-initializer")
	if err := images.GoBinary(ctx, n.opts.RepoRoot, "./cmd/storage-initializer", bin); err != nil {
		return err
	}
	return n.PushImage(ctx, images.StorageInitializerSpec(storageinit.DefaultImage, bin))
}
