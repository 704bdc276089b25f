#!/usr/bin/env bash
# Runs every test of rayshare: formatting, lints, unit tests, real-socket tests, the
# end-to-end tests against a real kube-apiserver, the end-to-end tests through the real
# KubeRay operator (with kube-scheduler, kube-controller-manager and kwok's fake nodes;
# v1.6.1, then the same suite against v1.5.1 and v1.4.2),
# the end-to-end tests under the real Volcano scheduler, controller-manager and webhook-manager,
# the end-to-end tests under the real Kueue controller manager (with its webhooks),
# the end-to-end tests on a real Ray head, the demo, the Helm chart checks (versions and the
# packaged chart too), actionlint on the release workflow, the image (a static binary in an
# OCI layout built without a daemon, run in a chroot: tests/tools/build-image.sh), the chart's
# Grafana dashboard and alerts (tests/tools/monitorcheck, promtool), and the fuzz targets
# (tests/fuzz.rs, proptest on stable Rust; RAYSHARE_FUZZ_CASES per target, default 1,000).
# On a fresh machine this first builds the control plane, helm, KubeRay, Volcano, Kueue, kwok and promtool from Go
# modules and installs Ray from PyPI (cached under ${RAYSHARE_CACHE:-$HOME/.cache/rayshare}).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*" >&2; }
start=$SECONDS

# A full disk shows up as a linker or rustc I/O error deep in a build; say it up front.
free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
echo "free disk here: $((free_kb / 1024 / 1024)) GiB" >&2

step "building the local control plane (kube-apiserver + etcd; cached after the first build)"
t=$SECONDS; bash tests/controlplane/build.sh >/dev/null; echo "control plane ready in $((SECONDS - t))s" >&2
step "building helm (cached after the first build)"
t=$SECONDS; bash tests/tools/build-helm.sh >/dev/null; echo "helm ready in $((SECONDS - t))s" >&2
step "building the KubeRay operator (cached after the first build)"
t=$SECONDS; bash tests/tools/build-kuberay.sh >/dev/null; echo "KubeRay ready in $((SECONDS - t))s" >&2
step "building the KubeRay operator v1.5.1 for the version matrix (cached after the first build)"
t=$SECONDS; bash tests/tools/build-kuberay.sh v1.5 >/dev/null; echo "KubeRay v1.5.1 ready in $((SECONDS - t))s" >&2
step "building the KubeRay operator v1.4.2 for the version matrix (cached after the first build)"
t=$SECONDS; bash tests/tools/build-kuberay.sh v1.4 >/dev/null; echo "KubeRay v1.4.2 ready in $((SECONDS - t))s" >&2
step "building Volcano's scheduler, controller-manager and webhook-manager (cached after the first build)"
t=$SECONDS; bash tests/tools/build-volcano.sh >/dev/null; echo "Volcano ready in $((SECONDS - t))s" >&2
step "building Kueue's controller manager (cached after the first build)"
t=$SECONDS; bash tests/tools/build-kueue.sh >/dev/null; echo "Kueue ready in $((SECONDS - t))s" >&2
step "building kwok (cached after the first build)"
t=$SECONDS; bash tests/tools/build-kwok.sh >/dev/null; echo "kwok ready in $((SECONDS - t))s" >&2
step "building promtool (checks the chart's alerts; cached after the first build)"
t=$SECONDS; bash tests/tools/build-promtool.sh >/dev/null; echo "promtool ready in $((SECONDS - t))s" >&2
step "installing Ray from PyPI for the real Ray head (cached after the first install)"
t=$SECONDS; bash tests/tools/install-ray.sh >/dev/null; echo "Ray ready in $((SECONDS - t))s" >&2
step "CRDs of KubeRay, Volcano and Kueue from their Go modules (cached)"
t=$SECONDS; for v in "" v1.5 v1.4; do RAYSHARE_KUBERAY=$v bash tests/tools/crds.sh >/dev/null; done
bash tests/tools/kueue-crds.sh >/dev/null
echo "CRDs ready in $((SECONDS - t))s" >&2

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
step "Helm chart: lint, render every certificate mode, deploy/ up to date, one version, packaged"
bash tests/tools/check-chart.sh
step "GitHub workflows: actionlint (built from its Go module, cached)"
bash tests/tools/actionlint.sh
step "the image, built without a daemon (static binary, OCI layout) and run in a chroot"
bash tests/tools/build-image.sh >/dev/null
step "cargo test (unit, server, end-to-end, through KubeRay, demo)"
cargo test --all-targets --locked -- --test-threads="${RAYSHARE_TEST_THREADS:-4}"
for v in v1.5 v1.4; do
  step "the KubeRay suite again, against KubeRay $v (its own CRDs)"
  RAYSHARE_KUBERAY=$v cargo test --locked --test kuberay -- --test-threads="${RAYSHARE_TEST_THREADS:-4}"
done

echo "all tests passed in $((SECONDS - start))s" >&2
