"""Checks an OCI image layout of rayshare (tests/tools/build-image.sh) as a runtime would
read it, and runs its entrypoint:

    python3 tests/tools/image_check.py LAYOUT_DIR VERSION

- oci-layout, index.json -> the manifest named VERSION -> config and layers; every blob's
  sha256 and size are what the referring descriptor says, and each layer's uncompressed
  sha256 is the config's diff_id;
- the config: linux, user 65532:65532, entrypoint [/usr/local/bin/rayshare, serve];
- the layers unpacked into an empty root filesystem (no absolute or `..` paths, no device
  files), then, in a chroot as 65532, `<entrypoint[0]> --version` names VERSION and
  `<entrypoint[0]> serve --help` shows serve's flags. Not root: through `unshare -r`.
Stdlib only."""

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile


def fail(message):
    sys.exit(f"image-check: FAIL: {message}")


def blob(layout, descriptor, media_type):
    if descriptor.get("mediaType") != media_type:
        fail(f"{descriptor.get('digest')}: media type {descriptor.get('mediaType')}, want {media_type}")
    algorithm, _, hexdigest = descriptor["digest"].partition(":")
    if algorithm != "sha256":
        fail(f"digest {descriptor['digest']}: not sha256")
    with open(os.path.join(layout, "blobs", "sha256", hexdigest), "rb") as f:
        data = f.read()
    if hashlib.sha256(data).hexdigest() != hexdigest:
        fail(f"blob {hexdigest}: its content has another digest")
    if len(data) != descriptor["size"]:
        fail(f"blob {hexdigest}: {len(data)} bytes, the descriptor says {descriptor['size']}")
    return data


def unpack(layer, rootfs):
    with tarfile.open(fileobj=io.BytesIO(layer), mode="r:") as tar:
        for member in tar.getmembers():
            name = os.path.normpath(member.name)
            if name.startswith(("/", "..")):
                fail(f"layer entry {member.name} leaves the root filesystem")
            if member.isdev() or member.issym() or member.islnk():
                fail(f"layer entry {member.name}: unexpected {member.type!r}")
        tar.extractall(rootfs, filter="tar")


def run_in_chroot(rootfs, argv):
    chroot = [shutil.which("chroot"), "--userspec=65532:65532", rootfs, *argv]
    if os.geteuid() != 0:
        chroot = [shutil.which("unshare"), "-r", shutil.which("chroot"), rootfs, *argv]
    # An empty environment: what the image alone provides.
    result = subprocess.run(chroot, capture_output=True, text=True, env={}, timeout=60)
    if result.returncode != 0:
        fail(f"{' '.join(argv)} in the chroot: exit {result.returncode}: {result.stderr}")
    return result.stdout


def main():
    layout, version = sys.argv[1], sys.argv[2]
    with open(os.path.join(layout, "oci-layout")) as f:
        if json.load(f).get("imageLayoutVersion") != "1.0.0":
            fail("oci-layout: imageLayoutVersion is not 1.0.0")
    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    named = [
        m for m in index["manifests"]
        if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == version
    ]
    if len(named) != 1:
        fail(f"index.json: {len(named)} manifests named {version}")
    manifest = json.loads(blob(layout, named[0], "application/vnd.oci.image.manifest.v1+json"))
    config = json.loads(blob(layout, manifest["config"], "application/vnd.oci.image.config.v1+json"))
    platform = named[0].get("platform", {}).get("architecture", config["architecture"])
    if config["os"] != "linux" or config["architecture"] != platform:
        fail(f"config platform {config['os']}/{config['architecture']}")
    run = config["config"]
    if run.get("User") != "65532:65532":
        fail(f"config user {run.get('User')}")
    entrypoint = run.get("Entrypoint")
    if entrypoint != ["/usr/local/bin/rayshare", "serve"]:
        fail(f"entrypoint {entrypoint}")
    diff_ids = config["rootfs"]["diff_ids"]
    if len(diff_ids) != len(manifest["layers"]):
        fail(f"{len(diff_ids)} diff_ids for {len(manifest['layers'])} layers")
    with tempfile.TemporaryDirectory() as rootfs:
        os.chmod(rootfs, 0o755)
        for descriptor, diff_id in zip(manifest["layers"], diff_ids):
            layer = gzip.decompress(
                blob(layout, descriptor, "application/vnd.oci.image.layer.v1.tar+gzip"))
            if "sha256:" + hashlib.sha256(layer).hexdigest() != diff_id:
                fail(f"layer {descriptor['digest']}: uncompressed digest is not {diff_id}")
            unpack(layer, rootfs)
        files = sorted(
            os.path.relpath(os.path.join(d, f), rootfs)
            for d, _, names in os.walk(rootfs) for f in names)
        if files != ["etc/group", "etc/passwd", "usr/local/bin/rayshare"]:
            fail(f"root filesystem holds {files}")
        said = run_in_chroot(rootfs, [entrypoint[0], "--version"]).strip()
        if not said.startswith(f"rayshare {version} (revision "):
            fail(f"--version says {said!r}, want rayshare {version}")
        help_text = run_in_chroot(rootfs, [*entrypoint, "--help"])
        for flag in ("--tls-cert", "--admin-listen", "--config"):
            if flag not in help_text:
                fail(f"serve --help lacks {flag}")
    size = sum(d["size"] for d in manifest["layers"])
    print(f"image-check: OK: {named[0]['digest']}, {size} bytes compressed, "
          f"{files}; in a chroot as 65532: {said!r}, serve --help")


if __name__ == "__main__":
    main()
