#!/usr/bin/env bash
# Builds the KubeRay operator (github.com/ray-project/kuberay/ray-operator, pinned in
# tests/tools/kuberay/go.mod as a `tool`) once and reuses the binary while the module and
# the Go toolchain are unchanged (tests/tools/go-build.sh caches it).
#
#   tests/tools/build-kuberay.sh   -> prints the path of the operator binary (stdout only)
#
# `go install ...ray-operator@v1.6.1` does not work here (the proxy refuses the version
# list it reads), hence the small module: to move to another release, change the version
# in go.mod (`go get -tool github.com/ray-project/kuberay/ray-operator@vX`, `go mod tidy`).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="$(bash "$here/go-build.sh" module "$here/kuberay" kuberay github.com/ray-project/kuberay/ray-operator)"
echo "$dir/ray-operator"
