package v1

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The default launch command: what a worker runs when its job names no
// command and no args (docs/trainingjob.md#the-default-launch-command). Seed
// 000's operator launched /app/train.py under the framework's launcher with
// the job's model, dataset, hyperparameters and checkpoint directory as
// flags; these templates do the same, and the admin may replace them per
// framework (the manager's --default-command).

// DefaultTrainScript is the script the default templates run.
const DefaultTrainScript = "/app/train.py"

// Placeholders of a LaunchTemplate.
const (
	// LaunchModel is spec.model.
	LaunchModel = "{model}"
	// LaunchDataset is spec.dataset.
	LaunchDataset = "{dataset}"
	// LaunchCheckpointDir is checkpoint.path (CHECKPOINT_DIR), empty when
	// checkpointing is off.
	LaunchCheckpointDir = "{checkpointDir}"
	// LaunchHyperparameters, a word of its own, becomes one word
	// --<key>=<value> per hyperparameter, sorted by key.
	LaunchHyperparameters = "{hyperparameters}"
)

// LaunchTemplate is a default launch command: words, some holding
// placeholders. A word holding {model}, {dataset} or {checkpointDir} is left
// out when that value is empty; {hyperparameters} stands alone and becomes a
// word per hyperparameter.
// +kubebuilder:object:generate=false
type LaunchTemplate []string

var placeholder = regexp.MustCompile(`\{[^{}]*\}`)

// ParseLaunchTemplate splits s into words (at white space) and checks its
// placeholders. An empty s is an empty template: no default command for
// that framework, so the image's entrypoint runs.
func ParseLaunchTemplate(s string) (LaunchTemplate, error) {
	words := strings.Fields(s)
	for _, w := range words {
		for _, p := range placeholder.FindAllString(w, -1) {
			switch p {
			case LaunchModel, LaunchDataset, LaunchCheckpointDir:
			case LaunchHyperparameters:
				if w != p {
					return nil, fmt.Errorf("%q: %s must be a word of its own", w, LaunchHyperparameters)
				}
			default:
				return nil, fmt.Errorf("%q: unknown placeholder %s (known: %s, %s, %s, %s)", w, p,
					LaunchModel, LaunchDataset, LaunchCheckpointDir, LaunchHyperparameters)
			}
		}
	}
	return LaunchTemplate(words), nil
}

// String is the template as ParseLaunchTemplate reads it.
func (t LaunchTemplate) String() string { return strings.Join(t, " ") }

// DefaultLaunchTemplates are the default launch commands per framework:
// torchrun (which reads the operator's PET_* variables) for pytorch, python
// for the others (TF_CONFIG, DMLC_* and JAX_* are read by the libraries).
func DefaultLaunchTemplates() map[Framework]LaunchTemplate {
	flags := []string{"--model=" + LaunchModel, "--dataset=" + LaunchDataset, LaunchHyperparameters, "--checkpoint-dir=" + LaunchCheckpointDir}
	return map[Framework]LaunchTemplate{
		FrameworkPyTorch:    slices.Concat([]string{"torchrun", DefaultTrainScript}, flags),
		FrameworkTensorFlow: slices.Concat([]string{"python", DefaultTrainScript}, flags),
		FrameworkXGBoost:    slices.Concat([]string{"python", DefaultTrainScript}, flags),
		FrameworkJAX:        slices.Concat([]string{"python", DefaultTrainScript}, flags),
	}
}

// Frameworks are the frameworks a TrainingJob may name.
var Frameworks = []Framework{FrameworkPyTorch, FrameworkTensorFlow, FrameworkXGBoost, FrameworkJAX}

// HyperparameterFlag is the word a hyperparameter becomes in
// {hyperparameters}: --<key as written>=<value>.
func HyperparameterFlag(key string, value HyperparameterValue) string {
	return "--" + key + "=" + value.String()
}

// Expand is the command the template gives for spec: the placeholders
// replaced, each $ doubled so the kubelet's $(VAR) expansion leaves the
// values as written. nil when the template is empty.
func (t LaunchTemplate) Expand(spec *TrainingJobSpec) []string {
	if len(t) == 0 {
		return nil
	}
	checkpointDir := ""
	if spec.CheckpointEnabled() {
		checkpointDir = spec.EffectiveCheckpointPath()
	}
	values := map[string]string{LaunchModel: spec.Model, LaunchDataset: spec.Dataset, LaunchCheckpointDir: checkpointDir}
	escape := strings.NewReplacer("$", "$$")
	var out []string
	for _, w := range t {
		if w == LaunchHyperparameters {
			keys := make([]string, 0, len(spec.Hyperparameters))
			for k := range spec.Hyperparameters {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				out = append(out, escape.Replace(HyperparameterFlag(k, spec.Hyperparameters[k])))
			}
			continue
		}
		keep := true
		word := placeholder.ReplaceAllStringFunc(w, func(p string) string {
			v := values[p]
			if v == "" {
				keep = false
			}
			return escape.Replace(v)
		})
		if keep {
			out = append(out, word)
		}
	}
	return out
}
