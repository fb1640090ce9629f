# Build the manager binary.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY api/ api/
COPY controllers/ controllers/
COPY webhooks/ webhooks/
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -ldflags="-s -w" -o manager ./cmd

# A static binary on distroless, as a non-root user.
FROM gcr.io/distroless/static:nonroot
LABEL org.opencontainers.image.title="ml-operator" \
      org.opencontainers.image.description="Kubernetes operator for distributed training (TrainingJob) and model serving (ModelDeployment)" \
      org.opencontainers.image.source="https://github.com/ml-operator/ml-operator" \
      org.opencontainers.image.licenses="Apache-2.0"
WORKDIR /
COPY --from=builder /workspace/manager .
USER 65532:65532
ENTRYPOINT ["/manager"]
