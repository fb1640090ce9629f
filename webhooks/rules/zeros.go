package rules

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// ZeroDefaulted is a field whose Go zero value means "unset": the defaulter
// fills 0 with the default, so an explicit 0 in a request, which is out of
// the field's bounds, would otherwise be replaced without a word (while a
// cluster without the webhooks refuses it with the CRD schema's minimum).
// min and max repeat the CRD schema's bounds (TestZeroDefaultedBoundsMatchTheCRDs).
type ZeroDefaulted struct {
	path     []string
	min, max int64 // max 0: no upper bound
}

func (z ZeroDefaulted) message() string {
	if z.max == 0 {
		return fmt.Sprintf("must be at least %d", z.min)
	}
	return fmt.Sprintf("must be between %d and %d", z.min, z.max)
}

// TrainingJobZeroDefaulted are the TrainingJob's zero-defaulted fields.
var TrainingJobZeroDefaulted = []ZeroDefaulted{
	{path: []string{"spec", "numWorkers"}, min: mlv1.MinNumWorkers, max: mlv1.MaxNumWorkers},
	{path: []string{"spec", "checkpoint", "frequency"}, min: 1},
	{path: []string{"spec", "checkpoint", "keepLast"}, min: 1},
	{path: []string{"spec", "networking", "masterPort"}, min: 1, max: 65535},
	{path: []string{"spec", "metrics", "port"}, min: 1, max: 65535},
}

// ModelDeploymentZeroDefaulted are the ModelDeployment's zero-defaulted
// fields.
var ModelDeploymentZeroDefaulted = []ZeroDefaulted{
	{path: []string{"spec", "port"}, min: 1, max: 65535},
	{path: []string{"spec", "scaling", "minReplicas"}, min: 1},
	{path: []string{"spec", "scaling", "targetCPUUtilization"}, min: 1, max: 100},
	{path: []string{"spec", "healthCheck", "intervalSeconds"}, min: 1, max: 3600},
	{path: []string{"spec", "healthCheck", "timeoutSeconds"}, min: 1},
	{path: []string{"spec", "healthCheck", "failureThreshold"}, min: 1},
	{path: []string{"spec", "rollout", "progressDeadlineSeconds"}, min: 1},
}

// v1alpha1ZeroDefaulted are the fields of TrainingJobZeroDefaulted that a
// v1alpha1 request can set (workers, checkpointInterval), by their v1 paths.
// The v1alpha1 schema defaults both to 1 when the request is decoded, before
// the request is converted to v1 for the webhooks, so a 0 that reaches the
// webhook in a v1alpha1 request was written by the user, although the
// conversion (which drops v1's empty numbers) makes it look missing.
var v1alpha1ZeroDefaulted = TrainingJobZeroDefaulted[:2]

// V1alpha1Zeros refuses the v1alpha1ZeroDefaulted fields that a v1alpha1
// request, converted to v1 (raw), leaves 0 or out.
func V1alpha1Zeros(raw []byte) field.ErrorList {
	return zerosOrMissingIn(raw, v1alpha1ZeroDefaulted, true)
}

// ZerosIn refuses each field of fields that the object's JSON (an
// admission request's object, before it is decoded and defaulted) sets to
// the number 0.
func ZerosIn(raw []byte, fields []ZeroDefaulted) field.ErrorList {
	return zerosOrMissingIn(raw, fields, false)
}

// zerosOrMissingIn refuses each field of fields that the object's JSON sets
// to the number 0 (or, with missingToo, leaves out).
func zerosOrMissingIn(raw []byte, fields []ZeroDefaulted, missingToo bool) field.ErrorList {
	var obj map[string]any
	if json.Unmarshal(raw, &obj) != nil {
		return nil // decoding errors are the decoder's to report
	}
	var errs field.ErrorList
	for _, f := range fields {
		v, found, _ := unstructured.NestedFieldNoCopy(obj, f.path...)
		if n, isNumber := v.(float64); (found && isNumber && n == 0) || (!found && missingToo) {
			errs = append(errs, field.Invalid(field.NewPath(f.path[0], f.path[1:]...), 0, f.message()))
		}
	}
	return errs
}
