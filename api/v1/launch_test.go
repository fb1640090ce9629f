package v1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// Admins write templates as text (the manager's --default-command); a
// placeholder that does not exist, or {hyperparameters} inside a word, is
// refused with the word and the rule.
func TestParseLaunchTemplate(t *testing.T) {
	got, err := ParseLaunchTemplate("  torchrun  /app/train.py --model={model}\t{hyperparameters} ")
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(LaunchTemplate{"torchrun", "/app/train.py", "--model={model}", "{hyperparameters}"}, got))

	empty, err := ParseLaunchTemplate("")
	require.NoError(t, err)
	require.Empty(t, empty)

	_, err = ParseLaunchTemplate("python x.py --m={modle}")
	require.EqualError(t, err, `"--m={modle}": unknown placeholder {modle} (known: {model}, {dataset}, {checkpointDir}, {hyperparameters})`)
	_, err = ParseLaunchTemplate("python x.py --hp={hyperparameters}")
	require.EqualError(t, err, `"--hp={hyperparameters}": {hyperparameters} must be a word of its own`)
}

// The default templates: seed 000's operator's launch of /app/train.py
// with --model, --dataset, the hyperparameters and --checkpoint-dir, under
// torchrun for PyTorch and python for the others.
func TestDefaultLaunchTemplates(t *testing.T) {
	flags := "--model={model} --dataset={dataset} {hyperparameters} --checkpoint-dir={checkpointDir}"
	want := map[Framework]string{
		FrameworkPyTorch:    "torchrun /app/train.py " + flags,
		FrameworkTensorFlow: "python /app/train.py " + flags,
		FrameworkXGBoost:    "python /app/train.py " + flags,
		FrameworkJAX:        "python /app/train.py " + flags,
	}
	got := map[Framework]string{}
	for fw, tmpl := range DefaultLaunchTemplates() {
		got[fw] = tmpl.String()
		_, err := ParseLaunchTemplate(tmpl.String())
		require.NoError(t, err, fw)
	}
	require.Empty(t, cmp.Diff(want, got))
	require.Len(t, Frameworks, len(want))
}
