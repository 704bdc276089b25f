#!/usr/bin/env bash
# Builds the pinned kwok (sigs.k8s.io/kwok/cmd/kwok: fake nodes and pod lifecycles, no
# containers) from source through the Go module proxy and caches it.
#
#   tests/tools/build-kwok.sh   -> prints the path of the kwok binary (stdout only)
#   tests/tools/build-kwok.sh --stages
#                               -> prints the directory of kwok's own stage configs
#                                  (kustomize/stage in the module), read at run time
#
# Cached by tests/tools/go-build.sh. Progress goes to stderr. kwok's go.mod has no
# replace directives, so a plain `go install pkg@version` works (needs Go >= 1.26).
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

exec bash "$(dirname "$self")/go-build.sh" install kwok "$KWOK_MODULE/cmd/kwok@$KWOK_VERSION" \
  "-X $KWOK_MODULE/pkg/consts.Version=${KWOK_VERSION#v}"
