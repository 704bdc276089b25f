#!/usr/bin/env bash
# Builds commands of a pinned Go module through a small wrapper module (its go.mod lists
# them as `tool`s and restates any replace directives the module needs) and caches the
# binaries while the wrapper and the Go toolchain are unchanged.
#
#   tests/tools/go-build-module.sh <wrapper dir> <name> <package>...
#       -> prints the directory holding one binary per package, named as its last path
#          element (stdout only; progress goes to stderr)
#
# Cache: ${RAYSHARE_CACHE:-$HOME/.cache/rayshare}/<name>-<key>/, key = sha256 over the
# wrapper's go.mod and go.sum, the packages, this script and `go version`.
set -euo pipefail

[[ $# -ge 3 ]] || { echo "usage: $0 <wrapper dir> <name> <package>..." >&2; exit 2; }
mod="$(cd "$1" && pwd)" name="$2"
shift 2
self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
log() { echo "$name: $*" >&2; }
command -v go >/dev/null 2>&1 || { log "go is not on PATH"; exit 1; }
export GOFLAGS="-buildvcs=false -mod=readonly"
export GOWORK=off
export CGO_ENABLED=0
cd "$mod"

key="$(
  {
    for f in "$self" go.mod go.sum; do
      printf '%s\n' "${f##*/}"
      sha256sum <"$f"
    done
    printf '%s\n' "$@"
    go version
  } | sha256sum | cut -c1-16
)"
cache_root="${RAYSHARE_CACHE:-${HOME:-/tmp}/.cache/rayshare}"
out_dir="$cache_root/$name-$key"
if [[ -f "$out_dir/.complete" ]]; then
  echo "$out_dir"
  exit 0
fi

log "building $* (first build downloads and compiles it: a few minutes)"
start=$SECONDS
mkdir -p "$cache_root"
tmp="$(mktemp -d "$cache_root/.$name-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
for pkg in "$@"; do
  go build -trimpath -ldflags "-s -w" -o "$tmp/$(basename "$pkg")" "$pkg" >&2
done
touch "$tmp/.complete"
# Publish atomically; a concurrent build that won the race is fine too.
if ! mv -T "$tmp" "$out_dir" 2>/dev/null; then
  [[ -f "$out_dir/.complete" ]] || { log "could not install into $out_dir"; exit 1; }
fi
trap - EXIT
log "built in $((SECONDS - start))s: $out_dir"
echo "$out_dir"
