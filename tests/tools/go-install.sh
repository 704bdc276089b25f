#!/usr/bin/env bash
# Builds a Go command from the module proxy (`go install <package>@<version>`) and caches
# the binary; the build scripts of the test tools call it.
#
#   tests/tools/go-install.sh <name> <package>@<version> [<ldflags>]
#       -> prints the path of the binary (stdout only; progress goes to stderr)
#
# Cache: ${RAYSHARE_CACHE:-$HOME/.cache/rayshare}/<name>-<key>/<binary>, key = sha256 of the
# package@version, the ldflags, this script and `go version`. Works for modules whose
# go.mod has no replace directives (a plain `go install pkg@version` builds them).
set -euo pipefail

[[ $# -ge 2 ]] || { echo "usage: $0 <name> <package>@<version> [<ldflags>]" >&2; exit 2; }
name="$1" target="$2" ldflags="${3:-}"
binary="$(basename "${target%@*}")"
self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
log() { echo "$name: $*" >&2; }
command -v go >/dev/null 2>&1 || { log "go is not on PATH"; exit 1; }

# Outside any module/workspace of the caller; a caller's GOFLAGS=-mod=... would break
# `go install pkg@version`.
export GOFLAGS="-buildvcs=false"
export GOWORK=off
export CGO_ENABLED=0
cd "${TMPDIR:-/tmp}"

key="$(printf '%s\n%s\n%s\n%s\n' "$target" "$ldflags" "$(sha256sum <"$self")" "$(go env GOVERSION)" |
  sha256sum | cut -c1-16)"
cache_root="${RAYSHARE_CACHE:-${HOME:-/tmp}/.cache/rayshare}"
out_dir="$cache_root/$name-$key"
out="$out_dir/$binary"
if [[ -x "$out" ]]; then
  echo "$out"
  exit 0
fi

log "building $target (the first build downloads and compiles it: a few minutes)"
start=$SECONDS
mkdir -p "$cache_root"
tmp="$(mktemp -d "$cache_root/.$name-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
GOBIN="$tmp" go install -trimpath -ldflags "-s -w $ldflags" "$target" >&2
# Publish atomically; a concurrent build that won the race is fine too.
if ! mv -T "$tmp" "$out_dir" 2>/dev/null; then
  [[ -x "$out" ]] || { log "could not install into $out_dir"; exit 1; }
fi
trap - EXIT
log "built in $((SECONDS - start))s: $out"
echo "$out"
