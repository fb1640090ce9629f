// Package packaging tests what ships: the kustomize install (config/default
// and its overlays), the OLM bundle, the file-based catalog, and that the
// monitoring queries use metrics the manager really exports. Nothing here
// needs a cluster except the metrics test, which runs envtest.
package packaging
