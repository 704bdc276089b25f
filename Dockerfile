# syntax=docker/dockerfile:1
# rayshare image: static-ish Rust binary on distroless (glibc + libgcc, no shell).
#   docker build -t rayshare:dev --build-arg RAYSHARE_REVISION=$(git rev-parse --short=12 HEAD) .
# Runs as 65532 (nonroot); the Helm chart mounts the TLS Secret at /etc/rayshare/tls and
# the config at /etc/rayshare/config/config.yaml.

FROM rust:1-bookworm AS builder
WORKDIR /src
# Only what the build needs (keeps the context and the layer cache small).
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
# The context has no .git: the revision `--version` and rayshare_build_info report.
ARG RAYSHARE_REVISION=unknown
ENV RAYSHARE_REVISION=${RAYSHARE_REVISION}
# The manifest names the benchmarks explicitly, so cargo wants their files to exist.
COPY benches ./benches
# Cache mounts (BuildKit) keep the crate registry and target dir between builds.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin rayshare \
 && install -D -m 0755 target/release/rayshare /out/rayshare

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/rayshare /usr/local/bin/rayshare
USER 65532:65532
# 8443: HTTPS admission endpoint (/mutate); 8080: /livez, /readyz, /metrics.
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/rayshare", "serve"]
