#!/usr/bin/env bash
# Fetches the CRDs of the optional objects the chart can render, which the e2e control
# plane does not have: cert-manager's Certificate/Issuer/ClusterIssuer (certs.mode=
# certManager) and the Prometheus Operator's ServiceMonitor (serviceMonitor.enabled=true).
# Both projects publish their generated CRD YAML inside their Go module, so they come from
# the Go module proxy like everything else (no cluster, no Docker, no helm repo).
#
#   tests/tools/extra-crds.sh   -> prints the CRD file paths, one per line (stdout only)
#
# Cache: ${RAYSHARE_CACHE:-$HOME/.cache/rayshare}/extra-crds-<key>/, key = sha256 of the
# pinned versions and file list; the files are copied there, so a later `go clean -modcache`
# does not matter. Progress goes to stderr.
set -euo pipefail

CERT_MANAGER_VERSION="${CERT_MANAGER_VERSION:-v1.21.2}"
PROMETHEUS_OPERATOR_VERSION="${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}"

# "module|version|directory in the module|CRD files"
sources=(
  "github.com/cert-manager/cert-manager|$CERT_MANAGER_VERSION|deploy/crds|cert-manager.io_certificates.yaml cert-manager.io_issuers.yaml cert-manager.io_clusterissuers.yaml"
  "github.com/prometheus-operator/prometheus-operator|$PROMETHEUS_OPERATOR_VERSION|example/prometheus-operator-crd|monitoring.coreos.com_servicemonitors.yaml"
)

log() { echo "extra-crds: $*" >&2; }

key="$(printf '%s\n' "${sources[@]}" | sha256sum | cut -c1-16)"
cache_root="${RAYSHARE_CACHE:-${HOME:-/tmp}/.cache/rayshare}"
out_dir="$cache_root/extra-crds-$key"

list() {
  local src files f
  for src in "${sources[@]}"; do
    IFS='|' read -r _ _ _ files <<<"$src"
    for f in $files; do echo "$out_dir/$f"; done
  done
}

if [[ -f "$out_dir/.complete" ]]; then
  list
  exit 0
fi

command -v go >/dev/null 2>&1 || { log "go is not on PATH"; exit 1; }
# Outside any module or workspace of the caller; a caller's GOFLAGS=-mod=... would break
# `go mod download module@version`.
export GOFLAGS=""
export GOWORK=off
cd "${TMPDIR:-/tmp}"

mkdir -p "$cache_root"
tmp="$(mktemp -d "$cache_root/.extra-crds.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

for src in "${sources[@]}"; do
  IFS='|' read -r module version subdir files <<<"$src"
  log "go mod download $module@$version"
  json="$(go mod download -json "$module@$version")" || { log "cannot download $module@$version: $json"; exit 1; }
  dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
  [[ -n "$dir" && -d "$dir/$subdir" ]] || { log "$module@$version has no $subdir"; exit 1; }
  for f in $files; do
    [[ -f "$dir/$subdir/$f" ]] || { log "$module@$version has no $subdir/$f"; exit 1; }
    cp "$dir/$subdir/$f" "$tmp/$f"
  done
done
chmod -R u+w "$tmp"
touch "$tmp/.complete"

# Publish atomically; a concurrent run that won the race is fine too.
if ! mv -T "$tmp" "$out_dir" 2>/dev/null; then
  [[ -f "$out_dir/.complete" ]] || { log "could not install into $out_dir"; exit 1; }
fi
list
