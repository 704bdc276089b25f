#!/usr/bin/env bash
# Installs the pinned Ray (`ray[default]`: the head, its dashboard and the job API) from
# PyPI into a cached virtualenv, for the tests that run a real Ray head.
#
#   tests/tools/install-ray.sh   -> prints the virtualenv's bin directory (stdout only)
#
# Cache: ${RAYSHARE_CACHE:-$HOME/.cache/rayshare}/ray-<key>/, key = sha256 of the pinned
# version, this script and the Python version. Progress goes to stderr.
set -euo pipefail

RAY_VERSION="${RAY_VERSION:-2.60.0}"
PYTHON="${PYTHON:-python3}"

self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
log() { echo "install-ray: $*" >&2; }
command -v "$PYTHON" >/dev/null 2>&1 || { log "$PYTHON is not on PATH"; exit 1; }

script_sum="$(sha256sum <"$self")"
key="$(printf '%s\n%s\n%s\n' "$RAY_VERSION" "$script_sum" "$("$PYTHON" --version 2>&1)" | sha256sum | cut -c1-16)"
cache_root="${RAYSHARE_CACHE:-${HOME:-/tmp}/.cache/rayshare}"
out_dir="$cache_root/ray-$key"

if [[ -f "$out_dir/.complete" ]]; then
  echo "$out_dir/bin"
  exit 0
fi

# A virtualenv's scripts name their interpreter by absolute path, so it is built in place;
# a lock keeps concurrent callers from building it twice and a marker says it is whole.
mkdir -p "$cache_root"
exec 9>"$out_dir.lock"
flock 9
if [[ -f "$out_dir/.complete" ]]; then
  echo "$out_dir/bin"
  exit 0
fi
log "installing ray[default]==$RAY_VERSION from PyPI (the first install downloads it: a minute or two)"
start=$SECONDS
rm -rf "$out_dir"
"$PYTHON" -m venv "$out_dir" >&2
"$out_dir/bin/pip" install --quiet --disable-pip-version-check "ray[default]==$RAY_VERSION" >&2
"$out_dir/bin/ray" --version >&2
touch "$out_dir/.complete"
log "installed in $((SECONDS - start))s: $out_dir"
echo "$out_dir/bin"
