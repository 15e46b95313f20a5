# syntax=docker/dockerfile:1
#
# memgate's container image: a static binary on an empty base, running as
# uid 65532, serving streamable HTTP on every interface at port 8765 with
# its stores in /data. docs/DEPLOY.md says how to run it.
#
#   docker build -t memgate --build-arg VERSION=v0.1.0 --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker run -p 8765:8765 -v memgate:/data --env-file memgate.env memgate
#
# The base images are arguments, so that a build works from local images
# where no registry can be reached (deploy/check builds it with buildah that
# way). The runtime base is empty: everything the process needs (the binary,
# the CA certificates for an identity service's HTTPS, a passwd entry for
# uid 65532, /data and /tmp) comes from the build stage. Pin GO_IMAGE by
# digest for a reproducible build.
ARG GO_IMAGE=golang:1.26-bookworm
ARG RUNTIME_IMAGE=scratch

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=""
ARG COMMIT=""
WORKDIR /src
# The modules first: a change of the sources alone reuses this layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Static (no cgo), without the build's paths, stamped with the version and
# the commit (-X: the sources in the image hold no .git).
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=${TARGETARCH:-$(go env GOARCH)} \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -buildid= -X main.stampVersion=${VERSION} -X main.stampCommit=${COMMIT}" \
      -o /out/memgate ./cmd/memgate
# The runtime's file system: /data owned by 65532 (a fresh volume takes its
# owner from the image), a sticky /tmp, the CA certificates, and a passwd
# and group naming 65532 (nonroot, as in distroless) for tools that look.
RUN mkdir -p /rootfs/data /rootfs/tmp /rootfs/etc/ssl/certs \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >/rootfs/etc/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' >/rootfs/etc/group \
 && chown 65532:65532 /rootfs/data && chmod 0700 /rootfs/data && chmod 1777 /rootfs/tmp

FROM ${RUNTIME_IMAGE}
ARG VERSION=""
ARG COMMIT=""
LABEL org.opencontainers.image.title="memgate" \
      org.opencontainers.image.description="A long-term memory for AI agents over MCP" \
      org.opencontainers.image.source="https://github.com/memgate/memgate" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      io.modelcontextprotocol.server.name="io.github.memgate/memgate"
COPY --from=build /rootfs/ /
COPY --from=build /out/memgate /memgate
# serve's settings as variables, so that `docker run IMAGE serve --allow-host
# memory.example.com` keeps them and `docker exec C /memgate stats` finds the
# stores. Every interface, other machines allowed: serve then refuses to
# start, in one line, until it is given an auth mode (MEMGATE_TOKEN,
# --tokens-file, --jwt-* or --oauth-*).
ENV MEMGATE_TRANSPORT=http \
    MEMGATE_BIND=0.0.0.0:8765 \
    MEMGATE_ALLOW_REMOTE=true \
    MEMGATE_DATA_DIR=/data \
    MEMGATE_LOG_FORMAT=json
USER 65532:65532
VOLUME ["/data"]
EXPOSE 8765
# Kubernetes ignores it (the chart has probes); Docker and compose use it.
# The OCI image format has no HEALTHCHECK: build with --format docker.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 CMD ["/memgate", "healthcheck"]
# SIGTERM (docker stop) ends streams, waits up to --shutdown-grace (15s),
# flushes every store and exits 0: give docker stop at least that (-t 20).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/memgate"]
CMD ["serve"]
