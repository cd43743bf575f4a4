# syntax=docker/dockerfile:1
#
# The gateway as a static binary on distroless, running as nonroot.
#
#   docker build --build-arg VERSION=$(git describe --always --dirty) -t dlgate .
#   docker run -p 8080:8080 -p 127.0.0.1:8081:8081 -v dlgate-data:/data dlgate
#
# With no other configuration it runs the embedded default (SQLite and the
# local object store) in /data. Set GATEWAY_PUBLIC_URL to the address
# clients use; otherwise links say http://localhost:8080. For production
# pass GATEWAY_* variables (see configs/mysql-s3.yaml), or mount a YAML file
# and run `serve --config /path/to/file.yaml`. No shell is needed or present.

ARG GO_VERSION=1.26
# The Go release that builds the binary; keep in step with the Makefile's
# RELEASE_GO_TOOLCHAIN.
ARG GO_TOOLCHAIN=go1.27.3

FROM golang:${GO_VERSION}-bookworm AS build
# The image's Go (1.26, what go.mod's go line asks for) only starts the
# build: GOTOOLCHAIN makes it fetch and run the release that has the standard
# library's security fixes (Go 1.26.8's net/http, crypto/tls, crypto/x509,
# ... vulnerabilities are fixed there), the same one `make build` and
# `make vulncheck` use. It overrides the image's own GOTOOLCHAIN=local. The
# toolchain comes from the Go module proxy, in the `go mod download` layer.
ARG GO_TOOLCHAIN
ENV GOTOOLCHAIN=${GO_TOOLCHAIN}
WORKDIR /src
# Dependencies first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# CGO_ENABLED=0: the SQLite driver is pure Go, so the binary needs no libc.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
        -o /out/gateway ./cmd/gateway
# The data directory, created here because the final image has no shell and
# WORKDIR would create it owned by root.
RUN mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gateway /gateway
COPY --from=build --chown=65532:65532 /out/data /data
USER nonroot
WORKDIR /data
ENV GATEWAY_DATA_DIR=/data \
    GATEWAY_LISTEN=0.0.0.0:8080 \
    GATEWAY_ADMIN_LISTEN=0.0.0.0:8081
EXPOSE 8080 8081
ENTRYPOINT ["/gateway"]
CMD ["serve"]
