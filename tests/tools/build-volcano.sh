#!/usr/bin/env bash
# Builds Volcano's scheduler and controller-manager (volcano.sh/volcano, pinned in
# tests/tools/volcano/go.mod, which restates the replace directives of Volcano's own go.mod
# that a consumer module must repeat) once and caches them.
#
#   tests/tools/build-volcano.sh   -> prints the directory holding `scheduler` and
#                                     `controller-manager` (stdout only)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$here/go-build.sh" module "$here/volcano" volcano \
  volcano.sh/volcano/cmd/scheduler volcano.sh/volcano/cmd/controller-manager
