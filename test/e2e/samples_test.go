//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// TestSamples applies config/samples the way the README says (kubectl apply
// -k) and follows every object: the jobs complete, the model servers run.
func TestSamples(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	kubectl(t, "apply", "-n", ns, "-k", filepath.Join(testutil.RepoRoot(), "config", "samples"))

	ctx := context.Background()
	jobs := &mlv1.TrainingJobList{}
	require.NoError(t, env.client.List(ctx, jobs, client.InNamespace(ns)))
	require.Len(t, jobs.Items, 3, "simple, distributed GPU and checkpointed jobs")
	mds := &mlv1.ModelDeploymentList{}
	require.NoError(t, env.client.List(ctx, mds, client.InNamespace(ns)))
	require.Len(t, mds.Items, 2, "A/B and canary ModelDeployments")

	for i := range jobs.Items {
		waitState(t, &jobs.Items[i], mlv1.StateCompleted)
	}
	for i := range mds.Items {
		md := &mds.Items[i]
		waitFor(t, 90*time.Second, "ModelDeployment "+md.Name+" Running", func() (bool, string) {
			got := &mlv1.ModelDeployment{}
			if err := env.client.Get(ctx, client.ObjectKeyFromObject(md), got); err != nil {
				return false, err.Error()
			}
			return got.Status.Phase == mlv1.PhaseRunning, fmt.Sprintf("phase %q, versions %+v", got.Status.Phase, got.Status.ActiveVersions)
		})
	}
}
