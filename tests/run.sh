#!/usr/bin/env bash
# Runs every test of rayshare: formatting, lints, unit tests, real-socket tests, the
# end-to-end tests against a real kube-apiserver, and the Helm chart checks.
# On a fresh machine this first builds the control plane and helm from Go modules.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*" >&2; }
start=$SECONDS

step "building the local control plane (kube-apiserver + etcd; cached after the first build)"
t=$SECONDS; bash tests/controlplane/build.sh >/dev/null; echo "control plane ready in $((SECONDS - t))s" >&2
step "building helm (cached after the first build)"
t=$SECONDS; bash tests/tools/build-helm.sh >/dev/null; echo "helm ready in $((SECONDS - t))s" >&2

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
step "Helm chart: lint, render every certificate mode, deploy/ up to date"
bash tests/tools/check-chart.sh
step "cargo test (unit, server, end-to-end, demo)"
cargo test --all-targets --locked -- --test-threads="${RAYSHARE_TEST_THREADS:-4}"

echo "all tests passed in $((SECONDS - start))s" >&2
