package images

import (
	"fmt"

	"github.com/ml-operator/ml-operator/internal/storageinit"
)

// The images the project builds and ships, said once: the real node pushes
// exactly these, and `make bundle` pins their digests into the CSV
// (hack/imagedigests), so the digest a bundle names is the digest of the
// image the real node runs.

// ManagerUser is the manager image's user: the Dockerfile's distroless
// nonroot user. The Deployment says runAsNonRoot, which needs a numeric
// non-root user in the image.
const ManagerUser = "65532:65532"

// ManagerSpec is the manager image named ref: the static ./cmd binary bin
// at /manager.
func ManagerSpec(ref, bin string) Spec {
	return Spec{
		Ref:        ref,
		Files:      []File{{Source: bin, Path: "/manager"}},
		Entrypoint: []string{"/manager"},
		User:       ManagerUser,
	}
}

// StorageInitializerSpec is the storage initializer image named ref: the
// static ./cmd/storage-initializer binary bin at /storage-initializer.
func StorageInitializerSpec(ref, bin string) Spec {
	return Spec{
		Ref:        ref,
		Files:      []File{{Source: bin, Path: "/storage-initializer"}},
		Entrypoint: []string{"/storage-initializer"},
		User:       storageinit.User,
	}
}

// TrainerRootfs is the root filesystem of the trainer image: Debian
// bookworm with PyTorch and the Prometheus client, for
// test/torch/trainer/train.py. `make trainer-rootfs` (hack/trainer-rootfs)
// makes it ahead of the real-node suite, which .ci/run does while it
// compiles.
var TrainerRootfs = Rootfs{
	Suite:    "bookworm",
	Variant:  "apt",
	Packages: []string{"python3-torch", "python3-prometheus-client"},
}

// Digest is the digest (sha256:...) of the image s describes, built now:
// the digest a registry serves the image under once it is pushed.
func Digest(s Spec) (string, error) {
	img, err := Build(s)
	if err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("image %s: %w", s.Ref, err)
	}
	return d.String(), nil
}
