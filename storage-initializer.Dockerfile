# The storage initializer image, ghcr.io/ml-operator/storage-initializer:
# the init container that fetches a ModelDeployment version's http(s):// or
# s3:// modelPath into the model volume (internal/storageinit).
# `make docker-build-storage-initializer STORAGE_INITIALIZER_IMG=...` (needs
# a container engine). The real node builds the same image without one
# (internal/realnode.PushStorageInitializer): the static binary of
# ./cmd/storage-initializer as /storage-initializer, run as user 65532,
# which the pods' runAsNonRoot needs as a number.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
# Every package the initializer imports (test/integration/packaging checks this list).
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o storage-initializer ./cmd/storage-initializer

# distroless/static carries the CA certificates https:// and AWS need.
FROM gcr.io/distroless/static:nonroot
ARG VERSION=0.2.0
LABEL org.opencontainers.image.title="ml-operator storage initializer" \
      org.opencontainers.image.description="Fetches a ModelDeployment version's model (http(s)://, s3://) into the model volume before the model server starts" \
      org.opencontainers.image.source="https://github.com/ml-operator/ml-operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.vendor="ml-operator" \
      org.opencontainers.image.licenses="Apache-2.0"
WORKDIR /
COPY --from=builder /workspace/storage-initializer .
USER 65532:65532
ENTRYPOINT ["/storage-initializer"]
