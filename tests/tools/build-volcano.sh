#!/usr/bin/env bash
# Builds Volcano's scheduler, controller-manager and webhook-manager (its admission
# webhooks) (volcano.sh/volcano, pinned in tests/tools/volcano/go.mod, which restates the
# replace directives of Volcano's own go.mod that a consumer module must repeat) once and
# caches them.
#
#   tests/tools/build-volcano.sh   -> prints the directory holding `scheduler`,
#                                     `controller-manager` and `webhook-manager` (stdout only)
#   tests/tools/build-volcano.sh --chart
#                                  -> prints the directory of Volcano's Helm chart
#                                     (installer/helm/chart/volcano in the same module
#                                     version), read at run time: the tests install the
#                                     webhooks as it does
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { echo "build-volcano: $*" >&2; }

if [[ "${1:-}" == "--chart" ]]; then
  command -v go >/dev/null 2>&1 || { log "go is not on PATH"; exit 1; }
  version="$(awk '$1 == "volcano.sh/volcano" { print $2; exit }' "$here/volcano/go.mod")"
  [[ -n "$version" ]] || { log "no volcano.sh/volcano version in $here/volcano/go.mod"; exit 1; }
  # Outside any module or workspace of the caller; a caller's GOFLAGS=-mod=... would break
  # `go mod download module@version`.
  export GOFLAGS="" GOWORK=off
  cd "${TMPDIR:-/tmp}"
  dir="$(go mod download -json "volcano.sh/volcano@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  chart="$dir/installer/helm/chart/volcano"
  [[ -n "$dir" && -f "$chart/Chart.yaml" ]] || { log "volcano.sh/volcano@$version has no installer/helm/chart/volcano"; exit 1; }
  echo "$chart"
  exit 0
fi

exec bash "$here/go-build.sh" module "$here/volcano" volcano \
  volcano.sh/volcano/cmd/scheduler volcano.sh/volcano/cmd/controller-manager \
  volcano.sh/volcano/cmd/webhook-manager
