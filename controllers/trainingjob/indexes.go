package trainingjob

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// IndexPodNodeName indexes pods by spec.nodeName, to find the jobs running on
// a node that went away.
const IndexPodNodeName = "spec.nodeName"

// SetupIndexes registers the field indexes the controller uses. main and the
// tests call it once per manager.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Pod{}, IndexPodNodeName, func(obj client.Object) []string {
		if n := obj.(*corev1.Pod).Spec.NodeName; n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing pods by node: %w", err)
	}
	return nil
}
