package security_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/internal/podsecurity"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// The pod IDs follow the cluster: a plain API server is not OpenShift, so
// workers run as user, group and fsGroup 1000 (stock root images start,
// Pod Security restricted admits them); once the API server serves
// security.openshift.io (here a SecurityContextConstraints CRD stands in for
// OpenShift's own API), no ID is fixed and restricted-v2 admits the pod.
func TestPodIDsFollowTheCluster(t *testing.T) {
	ctx := context.Background()
	openShift, err := manager.IsOpenShift(cfg)
	require.NoError(t, err)
	require.False(t, openShift, "envtest's API server is no OpenShift")

	job := testutil.TrainingJob("job", "ns").Workers(1).Obj()
	plain := workerConfig()
	plain.PodSecurity = podsecurity.NewDefaults().ForCluster(openShift)
	pod := trainingjob.DesiredWorkerPod(job, 0, 0, plain)
	sc := pod.Spec.SecurityContext
	assert.Equal(t, []*int64{ptr.To[int64](1000), ptr.To[int64](1000), ptr.To[int64](1000)}, []*int64{sc.RunAsUser, sc.RunAsGroup, sc.FSGroup})
	agg := restricted(t, &pod.ObjectMeta, &pod.Spec)
	assert.Truef(t, agg.Allowed, "violates restricted: %s", agg.ForbiddenDetail())
	assert.NotEmpty(t, restrictedV2(&pod.Spec), "a fixed UID is what restricted-v2 refuses")

	scc := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "securitycontextconstraints.security.openshift.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "security.openshift.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "securitycontextconstraints", Singular: "securitycontextconstraint", Kind: "SecurityContextConstraints", ListKind: "SecurityContextConstraintsList"},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	scheme := runtime.NewScheme()
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	crds, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	require.NoError(t, crds.Create(ctx, scc))
	t.Cleanup(func() { _ = crds.Delete(context.Background(), scc) })
	require.Eventually(t, func() bool {
		openShift, err = manager.IsOpenShift(cfg)
		return err == nil && openShift
	}, 30*time.Second, 200*time.Millisecond, "security.openshift.io served: OpenShift")

	ocp := workerConfig()
	ocp.PodSecurity = podsecurity.NewDefaults().ForCluster(openShift)
	pod = trainingjob.DesiredWorkerPod(job, 0, 0, ocp)
	sc = pod.Spec.SecurityContext
	assert.Nil(t, sc.RunAsUser)
	assert.Nil(t, sc.RunAsGroup)
	assert.Nil(t, sc.FSGroup)
	assert.Empty(t, restrictedV2(&pod.Spec))
	agg = restricted(t, &pod.ObjectMeta, &pod.Spec)
	assert.Truef(t, agg.Allowed, "violates restricted: %s", agg.ForbiddenDetail())
}
