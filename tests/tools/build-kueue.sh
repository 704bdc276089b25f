#!/usr/bin/env bash
# Builds Kueue's controller manager (sigs.k8s.io/kueue/cmd/kueue, pinned in
# tests/tools/kueue/go.mod as a `tool`; Kueue's go.mod has no replace directives) once and
# reuses the binary while the module and the Go toolchain are unchanged
# (tests/tools/go-build.sh caches it).
#
#   tests/tools/build-kueue.sh   -> the manager binary (stdout only)
#
# To move to another release: in tests/tools/kueue,
# `go get -tool sigs.k8s.io/kueue/cmd/kueue@vX` and `go mod tidy`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="$(bash "$here/go-build.sh" module "$here/kueue" kueue sigs.k8s.io/kueue/cmd/kueue)"
echo "$dir/kueue"
