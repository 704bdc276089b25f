# syntax=docker/dockerfile:1
# rayshare image: one static binary (musl) FROM scratch, plus /etc/passwd and /etc/group
# naming the nonroot user 65532. The same image, built without a daemon, is what
# tests/tools/build-image.sh assembles and checks (deploy/image/ holds the shared files).
#   docker build -t rayshare:dev --build-arg RAYSHARE_REVISION=$(git rev-parse --short=12 HEAD) .
# BuildKit (docker's default builder) is needed: it skips the stage not chosen by BINARY.
#   --build-arg BINARY=prebuilt   take dist/rayshare-linux-<arch> (the release workflow's
#                                 static binaries, one per platform) instead of compiling
# Runs as 65532 (nonroot); the Helm chart mounts the TLS Secret at /etc/rayshare/tls and
# the config at /etc/rayshare/config/config.yaml.
ARG BINARY=source

FROM rust:1-bookworm AS source
WORKDIR /src
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add "$(uname -m)-unknown-linux-musl"
# Only what the build needs (keeps the context and the layer cache small).
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
# The context has no .git: the revision `--version` and rayshare_build_info report.
ARG RAYSHARE_REVISION=unknown
ENV RAYSHARE_REVISION=${RAYSHARE_REVISION}
# The manifest names the benchmarks explicitly, so cargo wants their files to exist, and
# the test kit is a member of the workspace.
COPY benches ./benches
COPY tests/kit ./tests/kit
# Cache mounts keep the crate registry and target dir between builds.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    target="$(uname -m)-unknown-linux-musl" \
 && cargo build --release --locked --bin rayshare --target "$target" \
 && install -D -m 0755 "target/$target/release/rayshare" /out/rayshare \
 && strip --strip-debug /out/rayshare

FROM scratch AS prebuilt
ARG TARGETARCH
COPY --chmod=0755 dist/rayshare-linux-${TARGETARCH} /out/rayshare

FROM ${BINARY} AS binary

FROM scratch
ARG VERSION=dev
LABEL org.opencontainers.image.title="rayshare" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/rayshare/rayshare"
COPY deploy/image/passwd deploy/image/group /etc/
COPY --from=binary /out/rayshare /usr/local/bin/rayshare
USER 65532:65532
# 8443: HTTPS admission endpoint (/mutate); 8080: /livez, /readyz, /metrics.
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/rayshare", "serve"]
