package generated

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// Every field of both CRDs, in every served version, has a description, so
// `kubectl explain` has something to say about each of them. metadata is the
// API server's own (kubectl explains it from ObjectMeta).
func TestEveryCRDFieldHasADescription(t *testing.T) {
	for _, file := range []string{"ml.example.com_trainingjobs.yaml", "ml.example.com_modeldeployments.yaml"} {
		data, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "config", "crd", "bases", file))
		require.NoError(t, err)
		var crd apiextensionsv1.CustomResourceDefinition
		require.NoError(t, yaml.Unmarshal(data, &crd))
		for _, v := range crd.Spec.Versions {
			var missing []string
			var walk func(path string, s *apiextensionsv1.JSONSchemaProps)
			walk = func(path string, s *apiextensionsv1.JSONSchemaProps) {
				for name, p := range s.Properties {
					child := path + "." + name
					if child == ".metadata" {
						continue
					}
					if p.Description == "" {
						missing = append(missing, child)
					}
					walk(child, &p)
				}
				if s.Items != nil && s.Items.Schema != nil {
					walk(path+"[]", s.Items.Schema)
				}
				if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
					walk(path+"{}", s.AdditionalProperties.Schema)
				}
			}
			walk("", v.Schema.OpenAPIV3Schema)
			sort.Strings(missing)
			assert.Empty(t, missing, "%s %s: fields without a description", crd.Spec.Names.Kind, v.Name)
		}
	}
}
