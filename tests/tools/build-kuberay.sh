#!/usr/bin/env bash
# Builds the KubeRay operator (github.com/ray-project/kuberay/ray-operator, pinned in
# tests/tools/kuberay/go.mod as a `tool`) once and reuses the binary while the module and
# the Go toolchain are unchanged.
#
#   tests/tools/build-kuberay.sh   -> prints the path of the operator binary (stdout only)
#
# Cache: ${RAYSHARE_CACHE:-$HOME/.cache/rayshare}/kuberay-<key>/ray-operator, key = sha256
# over this script, go.mod, go.sum and `go version`. Progress goes to stderr.
# `go install ...ray-operator@v1.6.1` does not work here (the proxy refuses the version
# list it reads), hence the small module: to move to another release, change the version
# in go.mod (`go get -tool github.com/ray-project/kuberay/ray-operator@vX`, `go mod tidy`).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="$here/kuberay"
log() { echo "build-kuberay: $*" >&2; }

command -v go >/dev/null 2>&1 || { log "go is not on PATH"; exit 1; }
export GOFLAGS="-buildvcs=false -mod=readonly"
export GOWORK=off
export CGO_ENABLED=0
cd "$mod"

key="$(
  {
    for f in "$here/build-kuberay.sh" go.mod go.sum; do
      printf '%s\n' "${f##*/}"
      sha256sum <"$f"
    done
    go version
  } | sha256sum | cut -c1-16
)"
cache_root="${RAYSHARE_CACHE:-${HOME:-/tmp}/.cache/rayshare}"
out_dir="$cache_root/kuberay-$key"
out="$out_dir/ray-operator"

if [[ -x "$out" ]]; then
  echo "$out"
  exit 0
fi

version="$(go list -m -f '{{.Version}}' github.com/ray-project/kuberay/ray-operator)"
log "building the KubeRay operator $version (first build downloads and compiles it: a few minutes)"
start=$SECONDS
mkdir -p "$cache_root"
tmp="$(mktemp -d "$cache_root/.kuberay-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
go build -trimpath -ldflags "-s -w" \
  -o "$tmp/ray-operator" github.com/ray-project/kuberay/ray-operator >&2
# Publish atomically; a concurrent build that won the race is fine too.
if ! mv -T "$tmp" "$out_dir" 2>/dev/null; then
  [[ -x "$out" ]] || { log "could not install into $out_dir"; exit 1; }
fi
trap - EXIT
log "built in $((SECONDS - start))s: $out"
echo "$out"
