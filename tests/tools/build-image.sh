#!/usr/bin/env bash
# Builds rayshare's image without a container daemon and checks it:
#   1. a static binary: the musl target when it is installed (rustup target add
#      x86_64-unknown-linux-musl; its C parts need musl-gcc, Debian's musl-tools), else the
#      gnu target with a static C runtime (-C target-feature=+crt-static);
#   2. an OCI image layout FROM scratch, written by hand: one gzip layer (the binary,
#      without debug info, at
#      /usr/local/bin/rayshare; deploy/image/passwd and group), the config (user 65532,
#      entrypoint `rayshare serve`, the Dockerfile's ports and labels), the manifest and
#      index.json, each named by its sha256; reproducible (fixed owners, times, order);
#   3. the check (tests/tools/image_check.py): every blob's digest and size, the layer's
#      diff_id, the config; the root filesystem unpacked and the entrypoint run in a chroot
#      as user 65532 with `--version` (which must name the crate's version) and `serve --help`.
#
#   tests/tools/build-image.sh   -> prints the layout's directory (stdout only)
#   RAYSHARE_IMAGE_LIBC=gnu tests/tools/build-image.sh   the gnu fallback, on purpose
#
# Output: ${CARGO_TARGET_DIR:-target}/image/oci (a directory `skopeo copy oci:<dir>:<version>
# docker://...` or `podman load` reads). The Dockerfile builds the same image with docker.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
log() { echo "build-image: $*" >&2; }

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
arch="$(uname -m)"
case "$arch" in
  x86_64) oci_arch=amd64 ;;
  aarch64) oci_arch=arm64 ;;
  *) log "unsupported machine $arch"; exit 1 ;;
esac

# 1. The static binary.
musl="$arch-unknown-linux-musl"
# RAYSHARE_IMAGE_LIBC=gnu takes the fallback even where musl is there.
if [[ "${RAYSHARE_IMAGE_LIBC:-}" != gnu && -d "$(rustc --print sysroot)/lib/rustlib/$musl/lib" ]] &&
  command -v musl-gcc >/dev/null; then
  target="$musl"
  flags=()
else
  log "no $musl target (or no musl-gcc): the gnu target with a static C runtime"
  target="$arch-unknown-linux-gnu"
  flags=(--config "target.$target.rustflags=['-C', 'target-feature=+crt-static']")
fi
log "cargo build --release --target $target"
cargo build --release --locked --bin rayshare --target "$target" "${flags[@]}" >&2
binary="$target_dir/$target/release/rayshare"
# (The chroot check below proves it too: the root filesystem has no dynamic loader.)
linkage="$(ldd "$binary" 2>&1 || true)"
if [[ "$linkage" != *"statically linked"* && "$linkage" != *"not a dynamic executable"* ]]; then
  log "$binary is dynamically linked: $linkage"
  exit 1
fi

# 2. The OCI layout.
out="$target_dir/image"
rm -rf "$out/rootfs" "$out/oci"
mkdir -p "$out/rootfs/usr/local/bin" "$out/rootfs/etc" "$out/oci/blobs/sha256"
# Without its debug info (symbols stay, for backtraces): 26 MB instead of 120. The
# Dockerfile strips the same way.
strip --strip-debug -o "$out/rootfs/usr/local/bin/rayshare" "$binary"
chmod 0755 "$out/rootfs/usr/local/bin/rayshare"
install -m 0644 deploy/image/passwd deploy/image/group "$out/rootfs/etc/"
epoch="$(git log -1 --format=%ct 2>/dev/null || echo 0)"
created="$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)"
revision="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" --mode=go-w \
  --format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$out/rootfs" -cf "$out/layer.tar" usr etc
diff_id="$(sha256sum "$out/layer.tar" | cut -d' ' -f1)"
gzip -n -9 -c "$out/layer.tar" >"$out/layer.tar.gz"
rm "$out/layer.tar"

# Moves a file into blobs/ under its digest; prints "sha256:<hex> <size>".
blob() {
  local sum size
  sum="$(sha256sum "$1" | cut -d' ' -f1)"
  size="$(stat -c %s "$1")"
  mv "$1" "$out/oci/blobs/sha256/$sum"
  echo "sha256:$sum $size"
}
read -r layer_digest layer_size < <(blob "$out/layer.tar.gz")
labels="\"org.opencontainers.image.title\":\"rayshare\",\"org.opencontainers.image.version\":\"$version\",\"org.opencontainers.image.revision\":\"$revision\",\"org.opencontainers.image.licenses\":\"Apache-2.0\",\"org.opencontainers.image.source\":\"https://github.com/rayshare/rayshare\""
printf '%s' "{\"architecture\":\"$oci_arch\",\"os\":\"linux\",\"created\":\"$created\",\"config\":{\"User\":\"65532:65532\",\"Entrypoint\":[\"/usr/local/bin/rayshare\",\"serve\"],\"ExposedPorts\":{\"8080/tcp\":{},\"8443/tcp\":{}},\"Labels\":{$labels}},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:$diff_id\"]},\"history\":[{\"created\":\"$created\",\"created_by\":\"tests/tools/build-image.sh\"}]}" >"$out/config.json"
read -r config_digest config_size < <(blob "$out/config.json")
printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"$config_digest\",\"size\":$config_size},\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"$layer_digest\",\"size\":$layer_size}],\"annotations\":{$labels}}" >"$out/manifest.json"
read -r manifest_digest manifest_size < <(blob "$out/manifest.json")
printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"$manifest_digest\",\"size\":$manifest_size,\"platform\":{\"architecture\":\"$oci_arch\",\"os\":\"linux\"},\"annotations\":{\"org.opencontainers.image.ref.name\":\"$version\"}}]}" >"$out/oci/index.json"
printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$out/oci/oci-layout"
rm -rf "$out/rootfs"
log "image $version ($oci_arch, $target): $manifest_digest"

# 3. The check, on what was written (not on what the steps above meant to write).
python3 tests/tools/image_check.py "$out/oci" "$version" >&2
echo "$out/oci"
