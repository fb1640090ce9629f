package webhooks

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/webhooks/rules"
)

// +kubebuilder:webhook:path=/mutate-ml-example-com-v1-trainingjob,mutating=true,failurePolicy=fail,sideEffects=None,groups=ml.example.com,resources=trainingjobs,verbs=create;update,versions=v1,name=mtrainingjob.ml.example.com,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/validate-ml-example-com-v1-trainingjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=ml.example.com,resources=trainingjobs,verbs=create;update,versions=v1,name=vtrainingjob.ml.example.com,admissionReviewVersions=v1,matchPolicy=Equivalent

// TrainingJobWebhook defaults and validates TrainingJobs.
//
// The defaulting webhook also refuses invalid objects: mutating webhooks run
// before the API server checks the CRD schema, so refusing there gives users
// this webhook's precise messages rather than the schema's generic ones. The
// validating webhook runs the same rules again as the final word, after every
// mutating webhook in the cluster has had its turn.
type TrainingJobWebhook struct {
	// DefaultImages maps a framework to the image used when spec.image is empty.
	DefaultImages map[string]string
}

var (
	_ admission.Defaulter[*mlv1.TrainingJob] = &TrainingJobWebhook{}
	_ admission.Validator[*mlv1.TrainingJob] = &TrainingJobWebhook{}
)

var trainingJobKind = mlv1.GroupVersion.WithKind("TrainingJob").GroupKind()

// Default fills every unset field with the value the controller would use,
// then refuses the object if it is invalid.
func (w *TrainingJobWebhook) Default(ctx context.Context, job *mlv1.TrainingJob) error {
	old, err := oldObject[mlv1.TrainingJob](ctx)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	// v1alpha1 requires an image (API.md; its schema says so too), and its
	// users always gave one: the admin's default images are a v1 feature.
	// Without this the default would be filled in before the schema could
	// refuse the manifest, and a cluster with the webhooks would accept what
	// one without them refuses.
	// The same holds for the framework, which v1 defaults to pytorch.
	if requestVersion(ctx) == v1alpha1 {
		var errs field.ErrorList
		if job.Spec.Framework == "" {
			errs = append(errs, field.Required(field.NewPath("spec", "framework"),
				"required in ml.example.com/v1alpha1 (one of pytorch, tensorflow, xgboost)"))
		}
		if job.Spec.Image == "" {
			errs = append(errs, field.Required(field.NewPath("spec", "image"),
				"required in ml.example.com/v1alpha1 (default images apply to v1 only)"))
		}
		if len(errs) > 0 {
			return apierrors.NewInvalid(trainingJobKind, job.Name, errs)
		}
	}
	zeros := explicitZeros(ctx, rules.TrainingJobZeroDefaulted)
	if requestVersion(ctx) == v1alpha1 {
		if req, err := admission.RequestFromContext(ctx); err == nil {
			zeros = append(zeros, rules.V1alpha1Zeros(req.Object.Raw)...)
		}
	}
	rules.DefaultTrainingJob(job, old, w.DefaultImages)
	return w.admitAsRequested(ctx, old, job, zeros...)
}

// ValidateCreate refuses an invalid new TrainingJob.
func (w *TrainingJobWebhook) ValidateCreate(ctx context.Context, job *mlv1.TrainingJob) (admission.Warnings, error) {
	return nil, w.admitAsRequested(ctx, nil, job)
}

// ValidateUpdate refuses an invalid TrainingJob and changes API.md's
// immutability table forbids.
func (w *TrainingJobWebhook) ValidateUpdate(ctx context.Context, old, job *mlv1.TrainingJob) (admission.Warnings, error) {
	return nil, w.admitAsRequested(ctx, old, job)
}

// ValidateDelete allows every delete.
func (w *TrainingJobWebhook) ValidateDelete(context.Context, *mlv1.TrainingJob) (admission.Warnings, error) {
	return nil, nil
}

// admitAsRequested refuses job if found (problems found before defaulting:
// explicit zeros) or rules.TrainingJobProblems against the stored object
// old (nil on create) has any problem, with the field paths of a v1alpha1
// request in v1alpha1 terms.
func (w *TrainingJobWebhook) admitAsRequested(ctx context.Context, old, job *mlv1.TrainingJob, found ...*field.Error) error {
	errs := append(field.ErrorList(found), rules.TrainingJobProblems(old, job, w.DefaultImages)...)
	if requestVersion(ctx) == v1alpha1 {
		errs = rules.InV1alpha1Terms(errs)
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(trainingJobKind, job.Name, errs)
}
