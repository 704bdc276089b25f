#!/usr/bin/env bash
# Builds the pinned kwok (sigs.k8s.io/kwok/cmd/kwok: fake nodes and pod lifecycles, no
# containers) from source through the Go module proxy and caches it.
#
#   tests/tools/build-kwok.sh   -> prints the path of the kwok binary (stdout only)
#   tests/tools/build-kwok.sh --stages
#                               -> prints the directory of kwok's own stage configs
#                                  (kustomize/stage in the module), read at run time
#
# Cache: ${RAYSHARE_CACHE:-$HOME/.cache/rayshare}/kwok-<key>/kwok, key = sha256 of the
# pinned version, this script and `go version`. Progress goes to stderr. kwok's go.mod has
# no replace directives, so a plain `go install pkg@version` works (needs Go >= 1.26).
set -euo pipefail

KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
KWOK_MODULE="sigs.k8s.io/kwok"

self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
log() { echo "build-kwok: $*" >&2; }
command -v go >/dev/null 2>&1 || { log "go is not on PATH"; exit 1; }

# Outside any module/workspace of the caller; a caller's GOFLAGS=-mod=... would break
# `go install pkg@version`.
export GOFLAGS="-buildvcs=false"
export GOWORK=off
export CGO_ENABLED=0
cd "${TMPDIR:-/tmp}"

if [[ "${1:-}" == "--stages" ]]; then
  dir="$(go mod download -json "$KWOK_MODULE@$KWOK_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  [[ -n "$dir" && -d "$dir/kustomize/stage" ]] || { log "$KWOK_MODULE@$KWOK_VERSION has no kustomize/stage"; exit 1; }
  echo "$dir/kustomize/stage"
  exit 0
fi

script_sum="$(sha256sum <"$self")"
key="$(printf '%s\n%s\n%s\n' "$KWOK_VERSION" "$script_sum" "$(go env GOVERSION)" | sha256sum | cut -c1-16)"
cache_root="${RAYSHARE_CACHE:-${HOME:-/tmp}/.cache/rayshare}"
out_dir="$cache_root/kwok-$key"
out="$out_dir/kwok"

if [[ -x "$out" ]]; then
  echo "$out"
  exit 0
fi

log "building kwok $KWOK_VERSION (first build downloads and compiles it: a few minutes)"
start=$SECONDS
mkdir -p "$cache_root"
tmp="$(mktemp -d "$cache_root/.kwok-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
GOBIN="$tmp" go install -trimpath \
  -ldflags "-s -w -X $KWOK_MODULE/pkg/consts.Version=${KWOK_VERSION#v}" \
  "$KWOK_MODULE/cmd/kwok@$KWOK_VERSION" >&2
"$tmp/kwok" --version >&2
# Publish atomically; a concurrent build that won the race is fine too.
if ! mv -T "$tmp" "$out_dir" 2>/dev/null; then
  [[ -x "$out" ]] || { log "could not install into $out_dir"; exit 1; }
fi
trap - EXIT
log "built in $((SECONDS - start))s: $out"
echo "$out"
