package security_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/modeldeployment"
	"github.com/ml-operator/ml-operator/internal/podsecurity"
	"github.com/ml-operator/ml-operator/internal/storageinit"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// Every model server pod template the operator builds passes the Pod
// Security Standard "restricted": one version or several, with and without
// a model cache PVC and resources, whether an HPA owns the scale or not,
// with the storage initializer (s3://, http:// with a Secret) and with a
// pvc:// claim mounted.
func TestModelServerPodsAreRestricted(t *testing.T) {
	withStorage := testutil.ModelDeployment("md", "ns").Version("v1", 50, "s3://models/v1").Version("v2", 50, "pvc://models/m2").Obj()
	withStorage.Spec.Storage = &mlv1.ModelStorageSpec{Size: ptr.To(resource.MustParse("5Gi"))}
	withStorage.Spec.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	withSecret := testutil.ModelDeployment("md", "ns").Version("v1", -1, "https://models.example.com/m.json").Obj()
	withSecret.Spec.Versions[0].ModelSecretName = "store-auth"
	cases := map[string]*mlv1.ModelDeployment{
		"single version":                       testutil.ModelDeployment("md", "ns").Version("v1", -1, "s3://models/v1").Obj(),
		"http model with a Secret":             withSecret,
		"two versions, model cache, resources": withStorage,
	}
	for name, md := range cases {
		t.Run(name, func(t *testing.T) {
			require.NotEmpty(t, md.Spec.Versions)
			for _, v := range md.Spec.Versions {
				for _, replicas := range []*int32{nil, ptr.To[int32](0)} {
					d, err := modeldeployment.DesiredDeployment(md, v, replicas, podsecurity.NewDefaults(), storageinit.DefaultImage)
					require.NoError(t, err)
					tpl := d.Spec.Template
					require.NotEmpty(t, tpl.Spec.Containers, "the template has the model server")
					if !strings.HasPrefix(v.ModelPath, "pvc://") {
						require.Len(t, tpl.Spec.InitContainers, 1, "the storage initializer is checked too")
					}
					agg := restricted(t, &tpl.ObjectMeta, &tpl.Spec)
					assert.Truef(t, agg.Allowed, "version %s violates restricted: %s", v.Name, agg.ForbiddenDetail())
					assert.Emptyf(t, restrictedV2(&tpl.Spec), "version %s violates OpenShift's restricted-v2", v.Name)
				}
			}
		})
	}
}
