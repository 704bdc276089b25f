#!/usr/bin/env bash
# Kueue's CRDs, read from the same Go module as the manager the tests run
# (sigs.k8s.io/kueue at the version tests/tools/kueue/go.mod pins): all eleven of
# config/components/crd/bases, since the manager's controllers watch every kind there
# (ClusterQueue, LocalQueue, ResourceFlavor, Workload, WorkloadPriorityClass, Cohort,
# AdmissionCheck, Topology, ProvisioningRequestConfig, MultiKueueCluster, MultiKueueConfig).
# The bases carry no conversion webhook (v1beta2 is the storage version; the kustomize
# patches that add one are not applied here).
#
#   tests/tools/kueue-crds.sh             -> prints the directory holding the CRD files
#   tests/tools/kueue-crds.sh --webhooks  -> prints the path of Kueue's webhook
#                                            configurations (config/components/webhook/
#                                            manifests.yaml in the module), read at run time
#
# Cache: ${RAYSHARE_CACHE:-$HOME/.cache/rayshare}/kueue-crds-<key>/, key = sha256 of the
# module version and file list; the files are copied there, as tests/tools/crds.sh does.
# Progress goes to stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { echo "kueue-crds: $*" >&2; }

version="$(awk '$1 == "sigs.k8s.io/kueue" { print $2; exit }' "$here/kueue/go.mod")"
[[ -n "$version" ]] || { log "no sigs.k8s.io/kueue version in $here/kueue/go.mod"; exit 1; }
subdir=config/components/crd/bases
files=""
for kind in admissionchecks clusterqueues cohorts localqueues multikueueclusters \
  multikueueconfigs provisioningrequestconfigs resourceflavors topologies \
  workloadpriorityclasses workloads; do
  files+=" kueue.x-k8s.io_$kind.yaml"
done

module_dir() {
  command -v go >/dev/null 2>&1 || { log "go is not on PATH"; exit 1; }
  # Outside any module or workspace of the caller; a caller's GOFLAGS=-mod=... would break
  # `go mod download module@version`.
  local json dir
  json="$(cd "${TMPDIR:-/tmp}" && GOFLAGS="" GOWORK=off go mod download -json "sigs.k8s.io/kueue@$version")" ||
    { log "cannot download sigs.k8s.io/kueue@$version: $json"; exit 1; }
  dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
  [[ -n "$dir" && -d "$dir" ]] || { log "no module directory for sigs.k8s.io/kueue@$version"; exit 1; }
  echo "$dir"
}

if [[ "${1:-}" == "--webhooks" ]]; then
  manifests="$(module_dir)/config/components/webhook/manifests.yaml"
  [[ -f "$manifests" ]] || { log "sigs.k8s.io/kueue@$version has no config/components/webhook/manifests.yaml"; exit 1; }
  echo "$manifests"
  exit 0
fi

key="$(printf '%s\n' "sigs.k8s.io/kueue|$version|$subdir|$files" | sha256sum | cut -c1-16)"
cache_root="${RAYSHARE_CACHE:-${HOME:-/tmp}/.cache/rayshare}"
out_dir="$cache_root/kueue-crds-$key"
if [[ -f "$out_dir/.complete" ]]; then
  echo "$out_dir"
  exit 0
fi

log "go mod download sigs.k8s.io/kueue@$version"
dir="$(module_dir)"
mkdir -p "$cache_root"
tmp="$(mktemp -d "$cache_root/.kueue-crds.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
for f in $files; do
  [[ -f "$dir/$subdir/$f" ]] || { log "sigs.k8s.io/kueue@$version has no $subdir/$f"; exit 1; }
  cp "$dir/$subdir/$f" "$tmp/$f"
done
chmod -R u+w "$tmp"
chmod 0755 "$tmp"
touch "$tmp/.complete"

# Publish atomically; a concurrent run that won the race is fine too.
if ! mv -T "$tmp" "$out_dir" 2>/dev/null; then
  [[ -f "$out_dir/.complete" ]] || { log "could not install into $out_dir"; exit 1; }
fi
trap - EXIT
echo "$out_dir"
