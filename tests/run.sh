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

# Each step's time goes to a table printed at the end, passed or not, so a slow or cold
# run says where its minutes went.
times=()
current=""
start=$SECONDS
step() { # step "what" command...
  current=$1
  shift
  printf '\n==> %s\n' "$current" >&2
  local t=$SECONDS
  "$@"
  times+=("$(printf '%6ds  %s' $((SECONDS - t)) "$current")")
  current=""
}
quiet() { "$@" >/dev/null; }
summary() {
  local rc=$?
  printf '\n==> step times\n' >&2
  printf '%s\n' "${times[@]}" >&2
  if [[ -n $current ]]; then echo "failed in: $current" >&2; fi
  printf '%6ds  in all\n' $((SECONDS - start)) >&2
  return "$rc"
}
trap summary EXIT

# A full disk shows up as a linker or rustc I/O error deep in a build; say it up front.
free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
echo "free disk here: $((free_kb / 1024 / 1024)) GiB" >&2

step "build the local control plane (kube-apiserver + etcd, cached)" quiet bash tests/controlplane/build.sh
step "build helm (cached)" quiet bash tests/tools/build-helm.sh
step "build the KubeRay operator v1.6.1 (cached)" quiet bash tests/tools/build-kuberay.sh
step "build the KubeRay operator v1.5.1 for the version matrix (cached)" quiet bash tests/tools/build-kuberay.sh v1.5
step "build the KubeRay operator v1.4.2 for the version matrix (cached)" quiet bash tests/tools/build-kuberay.sh v1.4
step "build Volcano's scheduler, controller-manager and webhook-manager (cached)" quiet bash tests/tools/build-volcano.sh
step "build Kueue's controller manager (cached)" quiet bash tests/tools/build-kueue.sh
step "build kwok (cached)" quiet bash tests/tools/build-kwok.sh
step "build promtool (checks the chart's alerts; cached)" quiet bash tests/tools/build-promtool.sh
step "install Ray from PyPI for the real Ray head (cached)" quiet bash tests/tools/install-ray.sh
crds() {
  for v in "" v1.5 v1.4; do RAYSHARE_KUBERAY=$v bash tests/tools/crds.sh >/dev/null; done
  bash tests/tools/kueue-crds.sh >/dev/null
}
step "CRDs of KubeRay, Volcano and Kueue from their Go modules (cached)" crds

step "cargo fmt --check" cargo fmt --all -- --check
step "cargo clippy" cargo clippy --all-targets --locked -- -D warnings
step "Helm chart: lint, render every certificate mode, deploy/ up to date, one version, packaged" \
  bash tests/tools/check-chart.sh
step "GitHub workflows: actionlint (built from its Go module, cached)" bash tests/tools/actionlint.sh
step "the image, built without a daemon (static binary, OCI layout) and run in a chroot" \
  quiet bash tests/tools/build-image.sh
threads="${RAYSHARE_TEST_THREADS:-4}"
step "cargo test (unit, server, end-to-end, through KubeRay, demo)" \
  cargo test --all-targets --locked -- --test-threads="$threads"
for v in v1.5 v1.4; do
  step "the KubeRay suite again, against KubeRay $v (its own CRDs)" \
    env RAYSHARE_KUBERAY=$v cargo test --locked --test kuberay -- --test-threads="$threads"
done

echo "all tests passed" >&2
