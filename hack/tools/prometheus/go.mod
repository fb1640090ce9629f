module github.com/ml-operator/ml-operator/hack/tools/prometheus

go 1.26.0

require github.com/prometheus/prometheus v0.312.0
