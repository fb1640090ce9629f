# The manager image: `make docker-build IMG=...` (needs a container engine).
#
# Stage 1 builds a static binary (no cgo) for the target platform; stage 2
# copies it onto distroless/static, which has no shell or package manager,
# and runs it as the distroless nonroot user (65532), matching the
# Deployment's runAsNonRoot and read-only root filesystem.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace
# Dependencies first, so source edits do not invalidate the module cache layer.
COPY go.mod go.sum ./
RUN go mod download
# Every package the manager imports (test/packaging checks this list).
COPY cmd/ cmd/
COPY api/ api/
COPY controllers/ controllers/
COPY webhooks/ webhooks/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o manager ./cmd

FROM gcr.io/distroless/static:nonroot
ARG VERSION=0.2.0
LABEL org.opencontainers.image.title="ml-operator" \
      org.opencontainers.image.description="Kubernetes operator for distributed training (TrainingJob) and model serving (ModelDeployment)" \
      org.opencontainers.image.source="https://github.com/ml-operator/ml-operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.vendor="ml-operator" \
      org.opencontainers.image.licenses="Apache-2.0"
WORKDIR /
COPY --from=builder /workspace/manager .
USER 65532:65532
ENTRYPOINT ["/manager"]
