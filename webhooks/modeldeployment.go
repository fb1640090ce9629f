package webhooks

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/webhooks/rules"
)

// +kubebuilder:webhook:path=/mutate-ml-example-com-v1-modeldeployment,mutating=true,failurePolicy=fail,sideEffects=None,groups=ml.example.com,resources=modeldeployments,verbs=create;update,versions=v1,name=mmodeldeployment.ml.example.com,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/validate-ml-example-com-v1-modeldeployment,mutating=false,failurePolicy=fail,sideEffects=None,groups=ml.example.com,resources=modeldeployments,verbs=create;update,versions=v1,name=vmodeldeployment.ml.example.com,admissionReviewVersions=v1,matchPolicy=Equivalent

// ModelDeploymentWebhook defaults and validates ModelDeployments. Like
// TrainingJobWebhook, its defaulting webhook already refuses invalid objects,
// so users see these messages rather than the CRD schema's.
type ModelDeploymentWebhook struct{}

var (
	_ admission.Defaulter[*mlv1.ModelDeployment] = &ModelDeploymentWebhook{}
	_ admission.Validator[*mlv1.ModelDeployment] = &ModelDeploymentWebhook{}
)

var modelDeploymentKind = mlv1.GroupVersion.WithKind("ModelDeployment").GroupKind()

// Default fills every unset field with the value the controller would use,
// then refuses the object if it is invalid.
func (w *ModelDeploymentWebhook) Default(ctx context.Context, md *mlv1.ModelDeployment) error {
	old, err := oldObject[mlv1.ModelDeployment](ctx)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	zeros := explicitZeros(ctx, rules.ModelDeploymentZeroDefaulted)
	rules.DefaultModelDeployment(md, old)
	return admitModelDeployment(old, md, zeros...)
}

// ValidateCreate refuses an invalid new ModelDeployment.
func (w *ModelDeploymentWebhook) ValidateCreate(_ context.Context, md *mlv1.ModelDeployment) (admission.Warnings, error) {
	return nil, admitModelDeployment(nil, md)
}

// ValidateUpdate refuses an invalid ModelDeployment and changes to immutable fields.
func (w *ModelDeploymentWebhook) ValidateUpdate(_ context.Context, old, md *mlv1.ModelDeployment) (admission.Warnings, error) {
	return nil, admitModelDeployment(old, md)
}

// ValidateDelete allows every delete.
func (w *ModelDeploymentWebhook) ValidateDelete(context.Context, *mlv1.ModelDeployment) (admission.Warnings, error) {
	return nil, nil
}

// admitModelDeployment refuses md if found (problems found before
// defaulting) or its validation against old has any problem.
func admitModelDeployment(old, md *mlv1.ModelDeployment, found ...*field.Error) error {
	if errs := append(field.ErrorList(found), rules.ValidateModelDeployment(old, md)...); len(errs) > 0 {
		return apierrors.NewInvalid(modelDeploymentKind, md.Name, errs)
	}
	return nil
}
