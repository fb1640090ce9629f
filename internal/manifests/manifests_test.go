package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadSkipsEmptyDocumentsAndNamesTheFileOnError(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := Read(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetKind() != "ConfigMap" || objs[1].GetName() != "b" {
		t.Fatalf("Read = %v, want a ConfigMap and a Secret", objs)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("kind: [unclosed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("Read(bad) = %v, want an error naming %s", err, bad)
	}
}
