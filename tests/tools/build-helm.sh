#!/usr/bin/env bash
# Builds the pinned helm v3 from source through the Go module proxy and caches it.
#
#   tests/tools/build-helm.sh            -> prints the path of the helm binary (stdout only)
#
# Cached by tests/tools/go-build.sh. Progress goes to stderr.
# helm's go.mod has no replace directives, so a plain `go install pkg@version` works
# (no wrapper module needed). The ldflags mirror helm's Makefile: version string and the
# default Kubernetes version taken from helm's client-go dependency (otherwise
# `helm template` would assume Kubernetes v1.20).
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
HELM_MODULE="helm.sh/helm/v3"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { echo "build-helm: $*" >&2; }

command -v go >/dev/null 2>&1 || { log "go is not on PATH"; exit 1; }

# Outside any module/workspace of the caller; a caller's GOFLAGS=-mod=... would break
# `go install pkg@version`.
export GOFLAGS="-buildvcs=false"
export GOWORK=off
export CGO_ENABLED=0
cd "${TMPDIR:-/tmp}"

# Fetch the module to read its client-go version (the default KubeVersion of `helm template`).
gomod="$(go mod download -json "$HELM_MODULE@$HELM_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
[[ -n "$gomod" && -f "$gomod" ]] || { log "could not download $HELM_MODULE@$HELM_VERSION"; exit 1; }
client_go="$(awk '$1 == "k8s.io/client-go" { print $2; exit }' "$gomod")"   # e.g. v0.37.0
[[ "$client_go" =~ ^v0\.([0-9]+)\. ]] || { log "unexpected client-go version '$client_go'"; exit 1; }
k8s_major=1
k8s_minor="${BASH_REMATCH[1]}"

ldflags="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
ldflags+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$k8s_major"
ldflags+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$k8s_minor"
ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$k8s_major"
ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$k8s_minor"

exec bash "$here/go-build.sh" install helm "$HELM_MODULE/cmd/helm@$HELM_VERSION" "$ldflags"
