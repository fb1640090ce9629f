package rules

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// childName is a name the operator derives from a parent's name, with the
// Kubernetes rule it must meet where it is used.
type childName struct {
	what  string
	name  string
	check func(string) []string
}

// The rules Kubernetes applies to each kind of name.
var (
	dnsSubdomain = validation.IsDNS1123Subdomain // object names: pods, ConfigMaps, PVCs, Deployments, HPAs, PodGroups (<= 253)
	dnsLabel     = validation.IsDNS1123Label     // a pod's spec.hostname (<= 63)
	dns1035Label = validation.IsDNS1035Label     // Service names (<= 63, starting with a letter)
	labelValue   = validation.IsValidLabelValue  // label values (<= 63)
)

// trainingJobSchema is the part of the generated v1 TrainingJob schema the
// test reads, so it follows the bounds users actually get.
type trainingJobSchema struct {
	XValidations []struct {
		Rule string `json:"rule"`
	} `json:"x-kubernetes-validations"`
	Properties map[string]struct {
		Properties map[string]struct {
			Maximum *int `json:"maximum"`
		} `json:"properties"`
	} `json:"properties"`
}

func readTrainingJobSchema(t *testing.T) trainingJobSchema {
	t.Helper()
	data, err := os.ReadFile("../../config/crd/bases/ml.example.com_trainingjobs.yaml")
	require.NoError(t, err)
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema trainingJobSchema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(data, &crd))
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1" {
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatal("the CRD has no v1 version")
	return trainingJobSchema{}
}

// crdMaximum is the v1 schema's maximum of a TrainingJob spec field.
func crdMaximum(t *testing.T, field string) int {
	t.Helper()
	m := readTrainingJobSchema(t).Properties["spec"].Properties[field].Maximum
	require.NotNilf(t, m, "the v1 schema has no maximum for spec.%s", field)
	return *m
}

// Without the webhooks, the CRD's CEL rule is what bounds the name: it must
// be the same bound.
func TestCRDBoundsTheNameAtMaxNameLength(t *testing.T) {
	want := fmt.Sprintf("size(self.metadata.name) <= %d", mlv1.MaxNameLength)
	var rules []string
	for _, r := range readTrainingJobSchema(t).XValidations {
		rules = append(rules, r.Rule)
	}
	assert.Contains(t, rules, want)
}

// The longest TrainingJob name the webhooks accept (mlv1.MaxNameLength)
// still gives every child a name Kubernetes accepts where it is used. The
// tightest is the gang's group, <name>-<attempt>, a label value (Kueue's
// pod-group label, scheduler-plugins' pod-group label) for any int32
// attempt: 52 + 1 + 10 digits = 63. Raising MaxNameLength past 52 fails here.
func TestLongestTrainingJobNameGivesValidChildNames(t *testing.T) {
	name := "j" + strings.Repeat("x", mlv1.MaxNameLength-1)
	require.Empty(t, validateTrainingJobName(name), "the longest allowed name is accepted")
	require.NotEmpty(t, validateTrainingJobName(name+"x"), "one character more is refused")

	maxRank := max(crdMaximum(t, "numWorkers"), mlv1.MaxNumWorkers) - 1
	maxPS := crdMaximum(t, "parameterServers") - 1
	namespace := strings.Repeat("n", validation.DNS1123LabelMaxLength)
	children := []childName{
		{"pod name of the last rank", mlv1.WorkerPodName(name, int32(maxRank)), dnsSubdomain},
		{"spec.hostname of the last rank", mlv1.WorkerPodName(name, int32(maxRank)), dnsLabel},
		{"pod name of the last parameter server", mlv1.PSPodName(name, int32(maxPS)), dnsSubdomain},
		{"spec.hostname of the last parameter server", mlv1.PSPodName(name, int32(maxPS)), dnsLabel},
		{"headless Service (the pods' spec.subdomain)", mlv1.WorkersServiceName(name), dns1035Label},
		{"ConfigMap", mlv1.ConfigMapName(name), dnsSubdomain},
		{"checkpoint PVC", mlv1.CheckpointPVCName(name), dnsSubdomain},
		// The group of an attempt (a PodGroup, and the Kueue pod-group label).
		{"PodGroup of the last attempt", mlv1.GangGroupName(name, math.MaxInt32), dnsSubdomain},
		{"pod-group label value of the last attempt", mlv1.GangGroupName(name, math.MaxInt32), labelValue},
		{"job-name label value", name, labelValue},
		{"MASTER_ADDR in a 63-character namespace", mlv1.MasterAddr(name, namespace), dnsSubdomain},
	}
	for _, c := range children {
		assert.Emptyf(t, c.check(c.name), "%s %q (%d characters)", c.what, c.name, len(c.name))
	}
}

// Every ModelDeployment the webhooks accept gives its children valid names:
// the webhooks bound <name>-<version> to 63 characters, the Service (a
// DNS-1035 label) being the tightest; the ConfigMap and model cache PVC are
// DNS subdomains with room to spare. Each split of the 62 characters
// between the name and the version is tried, and one character more is refused.
func TestLongestModelDeploymentNamesGiveValidChildNames(t *testing.T) {
	longest := validation.DNS1035LabelMaxLength - 1 // "<name>-<version>" = 63
	for nameLen := 1; nameLen < longest; nameLen++ {
		name := "m" + strings.Repeat("x", nameLen-1)
		version := strings.Repeat("v", longest-nameLen)
		md := &mlv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: mlv1.ModelDeploymentSpec{
			ModelName: "m", Framework: mlv1.ModelFrameworkONNX, Image: "i",
			Versions: []mlv1.ModelVersion{{Name: version}},
		}}
		DefaultModelDeployment(md, nil)
		require.Emptyf(t, ValidateModelDeployment(nil, md), "name %d + version %d characters is accepted", len(name), len(version))
		longer := md.DeepCopy()
		longer.Spec.Versions[0].Name += "v"
		require.NotEmptyf(t, ValidateModelDeployment(nil, longer), "name %d + version %d characters is refused", len(name), len(version)+1)

		children := []childName{
			{"Service of the ModelDeployment", name, dns1035Label},
			{"Service of a version", mlv1.VersionResourceName(name, version), dns1035Label},
			{"Deployment and HPA of a version", mlv1.VersionResourceName(name, version), dnsSubdomain},
			{"server ConfigMap", mlv1.ModelDeploymentConfigMapName(name), dnsSubdomain},
			{"model cache PVC", mlv1.ModelCacheClaimName(name, version), dnsSubdomain},
			{"model-deployment label value", name, labelValue},
			{"model-version label value", version, labelValue},
		}
		for _, c := range children {
			assert.Emptyf(t, c.check(c.name), "%s %q (%d characters)", c.what, c.name, len(c.name))
		}
	}
}
