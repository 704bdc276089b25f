#!/usr/bin/env bash
# Builds Go commands from the module proxy and caches the binaries; the test tools' build
# scripts call it. Two ways in:
#
#   tests/tools/go-build.sh install <name> <package>@<version> [<ldflags>] [<tags>]
#       `go install` of a module whose go.mod has no replace directives (<tags>: Go build
#       tags, comma-separated) -> prints the path of the binary
#   tests/tools/go-build.sh module <wrapper dir> <name> <package>...
#       `go build` inside a small wrapper module (its go.mod lists the commands as `tool`s
#       and restates any replace directives the module needs)
#       -> prints the directory holding one binary per package, named as its last element
#
# Cache: ${RAYSHARE_CACHE:-$HOME/.cache/rayshare}/<name>-<key>/, key = sha256 of what is
# built (packages, ldflags, the wrapper's go.mod and go.sum), this script and
# `go version`. Progress goes to stderr, the path to stdout.
set -euo pipefail

usage() {
  echo "usage: $0 install <name> <package>@<version> [<ldflags>] [<tags>]" >&2
  echo "       $0 module <wrapper dir> <name> <package>..." >&2
  exit 2
}
self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
mode="${1:-}"
case "$mode" in
  install)
    [[ $# -ge 3 ]] || usage
    name="$2" target="$3" ldflags="${4:-}" tags="${5:-}"
    # Outside any module or workspace of the caller.
    workdir="${TMPDIR:-/tmp}"
    inputs() { printf '%s\n%s\n%s\n' "$target" "$ldflags" "$tags"; }
    build() { GOBIN="$1" go install -trimpath -tags "$tags" -ldflags "-s -w $ldflags" "$target"; }
    result() { echo "$1/$(basename "${target%@*}")"; }
    export GOFLAGS="-buildvcs=false"
    ;;
  module)
    [[ $# -ge 4 ]] || usage
    workdir="$(cd "$2" && pwd)" name="$3"
    shift 3
    packages=("$@")
    inputs() { cat go.mod go.sum; printf '%s\n' "${packages[@]}"; }
    build() {
      for pkg in "${packages[@]}"; do
        go build -trimpath -ldflags "-s -w" -o "$1/$(basename "$pkg")" "$pkg"
      done
    }
    result() { echo "$1"; }
    export GOFLAGS="-buildvcs=false -mod=readonly"
    ;;
  *) usage ;;
esac
log() { echo "$name: $*" >&2; }
command -v go >/dev/null 2>&1 || { log "go is not on PATH"; exit 1; }
export GOWORK=off
export CGO_ENABLED=0
cd "$workdir"

key="$({ inputs; sha256sum <"$self"; go version; } | sha256sum | cut -c1-16)"
cache_root="${RAYSHARE_CACHE:-${HOME:-/tmp}/.cache/rayshare}"
out_dir="$cache_root/$name-$key"
if [[ -f "$out_dir/.complete" ]]; then
  result "$out_dir"
  exit 0
fi

log "building (the first build downloads and compiles it: a few minutes)"
start=$SECONDS
mkdir -p "$cache_root"
tmp="$(mktemp -d "$cache_root/.$name-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
build "$tmp" >&2
touch "$tmp/.complete"
# Publish atomically; a concurrent build that won the race is fine too.
if ! mv -T "$tmp" "$out_dir" 2>/dev/null; then
  [[ -f "$out_dir/.complete" ]] || { log "could not install into $out_dir"; exit 1; }
fi
trap - EXIT
log "built in $((SECONDS - start))s: $out_dir"
result "$out_dir"
