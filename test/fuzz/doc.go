// Package fuzz holds native Go fuzz targets for the operator's untrusted
// inputs that have no fuzz target next to their code: the Prometheus text
// rank 0 serves (the user's code writes it) and TrainingJob conversion
// between v1alpha1 and v1 on arbitrary JSON. Their seed corpora run in
// `make test`; `make fuzz` (hack/mk/fuzz.mk) fuzzes each briefly. The
// package has no TestMain, so fuzz workers start no API server.
package fuzz
