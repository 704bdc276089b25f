#!/usr/bin/env bash
# Builds the KubeRay operator (github.com/ray-project/kuberay/ray-operator, pinned in
# tests/tools/kuberay/go.mod as a `tool`) once and reuses the binary while the module and
# the Go toolchain are unchanged (tests/tools/go-build.sh caches it).
#
#   tests/tools/build-kuberay.sh          -> the operator binary, v1.6.1 (stdout only)
#   tests/tools/build-kuberay.sh v1.5     -> v1.5.1 (tests/tools/kuberay-v1.5/go.mod)
#   tests/tools/build-kuberay.sh v1.4     -> v1.4.2 (tests/tools/kuberay-v1.4/go.mod)
#
# `go install ...ray-operator@v1.6.1` does not work here (the proxy refuses the version
# list it reads), hence the small modules: to move to another release, change the version
# in go.mod (`go get -tool github.com/ray-project/kuberay/ray-operator@vX`, `go mod tidy`).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
case "${1:-}" in
  "") module="$here/kuberay" name=kuberay ;;
  v1.5 | v1.4) module="$here/kuberay-$1" name="kuberay-$1" ;;
  *) echo "usage: $0 [v1.5|v1.4]" >&2; exit 2 ;;
esac
dir="$(bash "$here/go-build.sh" module "$module" "$name" github.com/ray-project/kuberay/ray-operator)"
echo "$dir/ray-operator"
