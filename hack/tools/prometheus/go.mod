module github.com/ml-operator/ml-operator/hack/tools/prometheus

go 1.26.0

require github.com/prometheus/prometheus v0.312.0

// Upstream's own module directives (github.com/prometheus/prometheus
// v0.312.0 go.mod), which apply only in the main module: without the
// replace, an old cloud.google.com/go in the build list would hold
// cloud.google.com/go/compute/metadata too (an ambiguous import).
replace cloud.google.com/go => cloud.google.com/go v0.123.0

exclude github.com/linode/linodego v1.0.0

exclude (
	github.com/grpc-ecosystem/grpc-gateway v1.14.7
	google.golang.org/api v0.30.0
)
