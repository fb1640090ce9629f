// Package conversion counts the calls the API server makes to the
// TrainingJob conversion webhook (issue 25). TrainingJob serves v1alpha1
// beside v1, and kube-apiserver keeps a watch cache per served version: the
// v1alpha1 cache converts every stored change to v1alpha1, whoever watches
// (kubernetes/kubernetes#129979). The suite pins that down on a real API
// server (envtest): with the watch cache on, exactly one /convert call per
// write, each to v1alpha1 from a v1 object, and none for v1 reads; with
// kube-apiserver's --watch-cache=false, none at all. A client of ours that
// started reading v1alpha1, or a second conversion per write, would break
// the counts. docs/benchmarks.md, "Conversion webhook calls follow the
// writes".
package conversion
