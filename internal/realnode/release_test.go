package realnode

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
)

func TestRaiseToProject(t *testing.T) {
	release := []byte(`module github.com/ml-operator/ml-operator

go 1.26.0

require (
	github.com/go-logr/logr v1.4.3
	k8s.io/client-go v0.36.3
	github.com/only/in-release v1.0.0
	go.opentelemetry.io/otel v1.45.0 // indirect
)
`)
	project := []byte(`module github.com/ml-operator/ml-operator

go 1.26.0

require (
	github.com/go-logr/logr v1.4.4
	k8s.io/client-go v0.36.3
	github.com/only/in-project v1.2.0
	go.opentelemetry.io/otel v1.44.0 // indirect
)
`)
	out, raised, err := raiseToProject(release, project)
	require.NoError(t, err)
	// Older in the release: raised. Equal, newer in the release, or not in
	// the project: kept. Nothing only the project has is added.
	assert.Equal(t, []string{"github.com/go-logr/logr v1.4.3 => v1.4.4"}, raised)
	got, err := modfile.Parse("go.mod", out, nil)
	require.NoError(t, err)
	versions := map[string]string{}
	for _, r := range got.Require {
		versions[r.Mod.Path] = r.Mod.Version
	}
	if diff := cmp.Diff(map[string]string{
		"github.com/go-logr/logr":    "v1.4.4",
		"k8s.io/client-go":           "v0.36.3",
		"github.com/only/in-release": "v1.0.0",
		"go.opentelemetry.io/otel":   "v1.45.0",
	}, versions); diff != "" {
		t.Errorf("requires (-want +got):\n%s", diff)
	}

	_, _, err = raiseToProject([]byte("module"), project)
	assert.ErrorContains(t, err, "the release's go.mod")
}

func TestMergeSums(t *testing.T) {
	a := []byte("b v1 h1:x\na v1 h1:y\n")
	b := []byte("a v1 h1:y\nc v1 h1:z\n\n")
	assert.Equal(t, "a v1 h1:y\nb v1 h1:x\nc v1 h1:z\n", string(mergeSums(a, b)))
}
