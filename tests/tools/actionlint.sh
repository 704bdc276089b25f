#!/usr/bin/env bash
# Lints the GitHub Actions workflows (.github/workflows/*.yml) with actionlint, built from
# its Go module (no binary download) and cached by version:
#   ${RAYSHARE_CACHE:-$HOME/.cache/rayshare}/actionlint-<version>/actionlint
# actionlint also runs shellcheck on `run:` scripts when shellcheck is on PATH
# (Debian: apt-get install shellcheck); without it, only actionlint's own checks run.
#
#   tests/tools/actionlint.sh             lint the workflows
#   tests/tools/actionlint.sh --print     build if needed, print the binary's path
set -euo pipefail

ACTIONLINT_VERSION="${ACTIONLINT_VERSION:-v1.7.12}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
log() { echo "actionlint: $*" >&2; }

cache_root="${RAYSHARE_CACHE:-${HOME:-/tmp}/.cache/rayshare}"
dir="$cache_root/actionlint-$ACTIONLINT_VERSION"
bin="$dir/actionlint"
if [[ ! -x "$bin" ]]; then
  command -v go >/dev/null 2>&1 || { log "go is not on PATH"; exit 1; }
  log "building actionlint $ACTIONLINT_VERSION from the Go module proxy"
  mkdir -p "$cache_root"
  tmp="$(mktemp -d "$cache_root/.actionlint.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # Outside any module of the caller; its GOFLAGS=-mod=... would break `go install pkg@v`.
  (cd "${TMPDIR:-/tmp}" && GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOBIN="$tmp" \
    go install "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION")
  mv -T "$tmp" "$dir" 2>/dev/null || [[ -x "$bin" ]]
fi
if [[ "${1:-}" == --print ]]; then
  echo "$bin"
  exit 0
fi
cd "$root"
workflows=(.github/workflows/*.yml)
"$bin" -no-color "${workflows[@]}"
log "OK ($ACTIONLINT_VERSION$(command -v shellcheck >/dev/null && echo ', with shellcheck')): ${workflows[*]}"
