# The model server image, ghcr.io/ml-operator/model-server:
# `make docker-build-model-server MODEL_SERVER_IMG=...` (needs a container
# engine). The real node builds the same image without one
# (internal/realnode.PushModelServer): the static binary of
# ./cmd/model-server as /model-server, run as user 65532, which a
# ModelDeployment's runAsNonRoot pods need as a number.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
# Every package the model server imports (test/integration/packaging checks this list).
COPY cmd/ cmd/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o model-server ./cmd/model-server

FROM gcr.io/distroless/static:nonroot
ARG VERSION=0.2.0
LABEL org.opencontainers.image.title="ml-operator model server" \
      org.opencontainers.image.description="The ml-operator project's model server: predictions, health probes and Prometheus metrics for a ModelDeployment" \
      org.opencontainers.image.source="https://github.com/ml-operator/ml-operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.vendor="ml-operator" \
      org.opencontainers.image.licenses="Apache-2.0"
WORKDIR /
COPY --from=builder /workspace/model-server .
USER 65532:65532
ENTRYPOINT ["/model-server"]
