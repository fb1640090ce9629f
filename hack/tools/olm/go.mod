module github.com/ml-operator/ml-operator/hack/tools/olm

go 1.26

require github.com/operator-framework/operator-lifecycle-manager v0.38.0

require github.com/grpc-ecosystem/grpc-health-probe v0.4.40
