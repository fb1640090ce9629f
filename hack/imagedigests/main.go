// Command imagedigests prints the digest of an image the project builds,
// built the way the real node builds it (internal/images), so that the
// digest a bundle or catalog pins is the digest of the image the real node
// pushes and runs. make bundle and make catalog-add call it.
//
//	imagedigests manager REPO_ROOT
//	    the manager image (./cmd)
//	imagedigests storage-initializer REPO_ROOT
//	    the storage initializer image (./cmd/storage-initializer)
//	imagedigests bundle CATALOG_FILE CSV_NAME ANNOTATIONS
//	    the bundle image of CSV_NAME as the catalog file renders it, with
//	    ANNOTATIONS as its metadata/annotations.yaml
//
// It prints one line, sha256:<hex>.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ml-operator/ml-operator/internal/images"
	"github.com/ml-operator/ml-operator/internal/realnode"
)

func main() {
	d, err := digest(context.Background(), os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagedigests:", err)
		os.Exit(1)
	}
	fmt.Println(d)
}

func digest(ctx context.Context, args []string) (string, error) {
	usage := fmt.Errorf("usage: imagedigests manager|storage-initializer REPO_ROOT, or imagedigests bundle CATALOG_FILE CSV_NAME ANNOTATIONS")
	if len(args) == 0 {
		return "", usage
	}
	tmp, err := os.MkdirTemp("", "imagedigests-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	switch {
	case (args[0] == "manager" || args[0] == "storage-initializer") && len(args) == 2:
		pkg, spec := "./cmd", images.ManagerSpec
		if args[0] == "storage-initializer" {
			pkg, spec = "./cmd/storage-initializer", images.StorageInitializerSpec
		}
		bin := filepath.Join(tmp, args[0])
		if err := images.GoBinary(ctx, args[1], pkg, bin); err != nil {
			return "", err
		}
		// The name is not part of the digest.
		return images.Digest(spec(args[0], bin))
	case args[0] == "bundle" && len(args) == 4:
		annotations, err := os.ReadFile(args[3])
		if err != nil {
			return "", err
		}
		if err := realnode.WriteBundleFromCatalog(args[1], args[2], annotations, tmp); err != nil {
			return "", err
		}
		s, err := realnode.BundleImageSpec(args[2], tmp)
		if err != nil {
			return "", err
		}
		return images.Digest(s)
	}
	return "", usage
}
