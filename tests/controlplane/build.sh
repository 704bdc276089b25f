#!/usr/bin/env bash
# Builds rayshare-controlplane (kube-apiserver + embedded etcd) once and reuses
# the binary while the sources and the Go toolchain are unchanged.
#
# Prints ONLY the binary path on stdout; progress goes to stderr.
#   ${RAYSHARE_CACHE:-$HOME/.cache/rayshare}/controlplane-<key>/rayshare-controlplane
# key = sha256 over build.sh, go.mod, go.sum, *.go and `go version`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

command -v go >/dev/null 2>&1 || { echo "build.sh: 'go' not found in PATH" >&2; exit 1; }

export CGO_ENABLED=0

key="$(
  {
    for f in build.sh go.mod go.sum $(LC_ALL=C ls -- *.go); do
      printf '%s\n' "$f"
      sha256sum <"$f"
    done
    go version
    echo "CGO_ENABLED=$CGO_ENABLED"
  } | sha256sum | cut -c1-16
)"

cache="${RAYSHARE_CACHE:-$HOME/.cache/rayshare}"
outdir="$cache/controlplane-$key"
bin="$outdir/rayshare-controlplane"

if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$outdir"
tmp="$(mktemp "$outdir/.rayshare-controlplane.tmp.XXXXXX")"
trap 'rm -f "$tmp"' EXIT

echo "build.sh: building rayshare-controlplane (first build downloads k8s.io/kubernetes and compiles it: several minutes)..." >&2
start=$SECONDS
# Stamp the kubernetes version (as the upstream build does) so /version reports
# e.g. v1.36.3 instead of "v0.0.0-master+$Format:%H$".
kver="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
kmajor="${kver#v}"; kmajor="${kmajor%%.*}"
kminor="${kver#v*.}"; kminor="${kminor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$kver -X $pkg.gitMajor=$kmajor -X $pkg.gitMinor=$kminor -X $pkg.gitTreeState=clean"
done
go build -trimpath -buildvcs=false -ldflags="$ldflags" -o "$tmp" . >&2
chmod 0755 "$tmp"
mv -f "$tmp" "$bin"
trap - EXIT
echo "build.sh: built $bin in $((SECONDS - start))s" >&2
echo "$bin"
