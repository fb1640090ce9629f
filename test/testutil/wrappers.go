package testutil

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// TrainingJobWrapper builds TrainingJobs for tests:
// testutil.TrainingJob("name", ns).Workers(4).GPUs(2).Obj().
type TrainingJobWrapper struct{ mlv1.TrainingJob }

// TrainingJob starts a PyTorch job with one rank, one GPU and an image.
func TrainingJob(name, namespace string) *TrainingJobWrapper {
	return &TrainingJobWrapper{mlv1.TrainingJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: mlv1.GroupVersion.String(), Kind: "TrainingJob"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: mlv1.TrainingJobSpec{
			Framework:  mlv1.FrameworkPyTorch,
			Image:      "example.com/trainer:latest",
			NumWorkers: 1,
		},
	}}
}

// Obj returns a copy of the built object.
func (w *TrainingJobWrapper) Obj() *mlv1.TrainingJob { return w.DeepCopy() }

// Framework sets spec.framework.
func (w *TrainingJobWrapper) Framework(f mlv1.Framework) *TrainingJobWrapper {
	w.Spec.Framework = f
	return w
}

// Image sets spec.image.
func (w *TrainingJobWrapper) Image(image string) *TrainingJobWrapper {
	w.Spec.Image = image
	return w
}

// Command sets spec.command.
func (w *TrainingJobWrapper) Command(cmd ...string) *TrainingJobWrapper {
	w.Spec.Command = cmd
	return w
}

// Args sets spec.args.
func (w *TrainingJobWrapper) Args(args ...string) *TrainingJobWrapper {
	w.Spec.Args = args
	return w
}

// Workers sets spec.numWorkers.
func (w *TrainingJobWrapper) Workers(n int32) *TrainingJobWrapper {
	w.Spec.NumWorkers = n
	return w
}

// GPUs sets spec.gpusPerWorker.
func (w *TrainingJobWrapper) GPUs(n int32) *TrainingJobWrapper {
	w.Spec.GPUsPerWorker = ptr.To(n)
	return w
}

// NProcPerNode sets spec.nprocPerNode.
func (w *TrainingJobWrapper) NProcPerNode(n int32) *TrainingJobWrapper {
	w.Spec.NProcPerNode = ptr.To(n)
	return w
}

// Model sets spec.model.
func (w *TrainingJobWrapper) Model(m string) *TrainingJobWrapper {
	w.Spec.Model = m
	return w
}

// Dataset sets spec.dataset.
func (w *TrainingJobWrapper) Dataset(d string) *TrainingJobWrapper {
	w.Spec.Dataset = d
	return w
}

// Hyperparameter sets one hyperparameter (string, number or bool).
func (w *TrainingJobWrapper) Hyperparameter(key string, value any) *TrainingJobWrapper {
	if w.Spec.Hyperparameters == nil {
		w.Spec.Hyperparameters = map[string]mlv1.HyperparameterValue{}
	}
	w.Spec.Hyperparameters[key] = mlv1.NewHyperparameter(value)
	return w
}

// Env adds an environment variable.
func (w *TrainingJobWrapper) Env(name, value string) *TrainingJobWrapper {
	w.Spec.Env = append(w.Spec.Env, corev1.EnvVar{Name: name, Value: value})
	return w
}

// Suspend sets spec.suspend.
func (w *TrainingJobWrapper) Suspend(s bool) *TrainingJobWrapper {
	w.Spec.Suspend = ptr.To(s)
	return w
}

// RestartPolicy sets spec.restartPolicy.
func (w *TrainingJobWrapper) RestartPolicy(p mlv1.RestartPolicy) *TrainingJobWrapper {
	w.Spec.RestartPolicy = p
	return w
}

// BackoffLimit sets spec.backoffLimit.
func (w *TrainingJobWrapper) BackoffLimit(n int32) *TrainingJobWrapper {
	w.Spec.BackoffLimit = ptr.To(n)
	return w
}

// CheckpointStorage sets spec.checkpoint.storage.
func (w *TrainingJobWrapper) CheckpointStorage(s mlv1.CheckpointStorage) *TrainingJobWrapper {
	w.Spec.Checkpoint.Storage = s
	return w
}

// RetainCheckpoints sets spec.checkpoint.retainOnDelete.
func (w *TrainingJobWrapper) RetainCheckpoints(retain bool) *TrainingJobWrapper {
	w.Spec.Checkpoint.RetainOnDelete = ptr.To(retain)
	return w
}

// CleanPodPolicy sets spec.runPolicy.cleanPodPolicy.
func (w *TrainingJobWrapper) CleanPodPolicy(p mlv1.CleanPodPolicy) *TrainingJobWrapper {
	w.Spec.RunPolicy.CleanPodPolicy = p
	return w
}

// ActiveDeadlineSeconds sets spec.runPolicy.activeDeadlineSeconds.
func (w *TrainingJobWrapper) ActiveDeadlineSeconds(s int64) *TrainingJobWrapper {
	w.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To(s)
	return w
}

// TTLSecondsAfterFinished sets spec.runPolicy.ttlSecondsAfterFinished.
func (w *TrainingJobWrapper) TTLSecondsAfterFinished(s int32) *TrainingJobWrapper {
	w.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To(s)
	return w
}

// ParameterServers sets spec.parameterServers.
func (w *TrainingJobWrapper) ParameterServers(n int32) *TrainingJobWrapper {
	w.Spec.ParameterServers = n
	return w
}

// Resources sets spec.resources.
func (w *TrainingJobWrapper) Resources(r corev1.ResourceRequirements) *TrainingJobWrapper {
	w.Spec.Resources = r
	return w
}

// Label adds a label to the job.
func (w *TrainingJobWrapper) Label(k, v string) *TrainingJobWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// ModelDeploymentWrapper builds ModelDeployments for tests.
type ModelDeploymentWrapper struct{ mlv1.ModelDeployment }

// ModelDeployment starts a pytorch ModelDeployment with no versions.
func ModelDeployment(name, namespace string) *ModelDeploymentWrapper {
	return &ModelDeploymentWrapper{mlv1.ModelDeployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: mlv1.GroupVersion.String(), Kind: "ModelDeployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: mlv1.ModelDeploymentSpec{
			ModelName: name,
			Framework: mlv1.ModelFrameworkPyTorch,
			Image:     "example.com/server:latest",
		},
	}}
}

// Obj returns a copy of the built object.
func (w *ModelDeploymentWrapper) Obj() *mlv1.ModelDeployment { return w.DeepCopy() }

// Version adds a version with a weight (a negative weight leaves it unset).
func (w *ModelDeploymentWrapper) Version(name string, weight int32, modelPath string) *ModelDeploymentWrapper {
	v := mlv1.ModelVersion{Name: name, ModelPath: modelPath}
	if weight >= 0 {
		v.Weight = ptr.To(weight)
	}
	w.Spec.Versions = append(w.Spec.Versions, v)
	return w
}

// Framework sets spec.framework.
// ModelSecret names the credentials Secret of version i.
func (w *ModelDeploymentWrapper) ModelSecret(i int, secret string) *ModelDeploymentWrapper {
	w.Spec.Versions[i].ModelSecretName = secret
	return w
}

func (w *ModelDeploymentWrapper) Framework(f mlv1.ModelFramework) *ModelDeploymentWrapper {
	w.Spec.Framework = f
	return w
}

// Router sets spec.traffic.router.
func (w *ModelDeploymentWrapper) Router(r mlv1.TrafficRouter) *ModelDeploymentWrapper {
	w.Spec.Traffic.Router = r
	return w
}

// Replicas sets spec.scaling min and max replicas.
func (w *ModelDeploymentWrapper) Replicas(minReplicas, maxReplicas int32) *ModelDeploymentWrapper {
	w.Spec.Scaling.MinReplicas = minReplicas
	w.Spec.Scaling.MaxReplicas = ptr.To(maxReplicas)
	return w
}

// HealthCheck sets spec.healthCheck interval and timeout.
func (w *ModelDeploymentWrapper) HealthCheck(intervalSeconds, timeoutSeconds int32) *ModelDeploymentWrapper {
	w.Spec.HealthCheck.IntervalSeconds = intervalSeconds
	w.Spec.HealthCheck.TimeoutSeconds = timeoutSeconds
	return w
}
