#!/usr/bin/env bash
# The CRDs every test world installs, read from the same Go modules as the programs that
# serve them: KubeRay's from ray-operator at the version tests/tools/kuberay/go.mod pins
# (the operator the tests run), or tests/tools/kuberay-<v>/go.mod with RAYSHARE_KUBERAY=<v>
# (v1.5, v1.4: the version matrix installs the CRDs of the KubeRay it runs); Volcano's
# PodGroup and Queue, and the Command and Numatopology its scheduler and controllers watch,
# from volcano.sh/volcano.
#
#   tests/tools/crds.sh   -> prints the directory holding the CRD files (stdout only)
#
# Cache: ${RAYSHARE_CACHE:-$HOME/.cache/rayshare}/crds-<key>/, key = sha256 of the
# sources below; the files are copied there, so a later `go clean -modcache` does not
# matter. Progress goes to stderr. The benchmark calls this too.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { echo "crds: $*" >&2; }

case "${RAYSHARE_KUBERAY:-}" in
  "") kuberay_mod="$here/kuberay/go.mod" ;;
  v1.5 | v1.4) kuberay_mod="$here/kuberay-$RAYSHARE_KUBERAY/go.mod" ;;
  *) log "RAYSHARE_KUBERAY=$RAYSHARE_KUBERAY: only v1.5, v1.4 (or unset) are pinned"; exit 2 ;;
esac
KUBERAY_VERSION="$(awk '$1 == "github.com/ray-project/kuberay/ray-operator" { print $2; exit }' "$kuberay_mod")"
[[ -n "$KUBERAY_VERSION" ]] || { log "no ray-operator version in $kuberay_mod"; exit 1; }
VOLCANO_VERSION="${VOLCANO_VERSION:-v1.10.0}"

# "module|version|directory in the module|CRD files" (RayCronJob is new in v1.6)
kuberay_crds="ray.io_rayclusters.yaml ray.io_rayjobs.yaml ray.io_rayservices.yaml"
[[ "$KUBERAY_VERSION" == v1.[45].* ]] || kuberay_crds+=" ray.io_raycronjobs.yaml"
sources=(
  "github.com/ray-project/kuberay/ray-operator|$KUBERAY_VERSION|config/crd/bases|$kuberay_crds"
  "volcano.sh/volcano|$VOLCANO_VERSION|config/crd/volcano/bases|scheduling.volcano.sh_podgroups.yaml scheduling.volcano.sh_queues.yaml bus.volcano.sh_commands.yaml nodeinfo.volcano.sh_numatopologies.yaml"
)

key="$(printf '%s\n' "${sources[@]}" | sha256sum | cut -c1-16)"
cache_root="${RAYSHARE_CACHE:-${HOME:-/tmp}/.cache/rayshare}"
out_dir="$cache_root/crds-$key"

if [[ -f "$out_dir/.complete" ]]; then
  echo "$out_dir"
  exit 0
fi

command -v go >/dev/null 2>&1 || { log "go is not on PATH"; exit 1; }
# Outside any module or workspace of the caller; a caller's GOFLAGS=-mod=... would break
# `go mod download module@version`.
export GOFLAGS=""
export GOWORK=off
cd "${TMPDIR:-/tmp}"

mkdir -p "$cache_root"
tmp="$(mktemp -d "$cache_root/.crds.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

for src in "${sources[@]}"; do
  IFS='|' read -r module version subdir files <<<"$src"
  log "go mod download $module@$version"
  json="$(go mod download -json "$module@$version")" || { log "cannot download $module@$version: $json"; exit 1; }
  dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
  [[ -n "$dir" && -d "$dir/$subdir" ]] || { log "$module@$version has no $subdir"; exit 1; }
  for f in $files; do
    [[ -f "$dir/$subdir/$f" ]] || { log "$module@$version has no $subdir/$f"; exit 1; }
    cp "$dir/$subdir/$f" "$tmp/$f"
  done
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
