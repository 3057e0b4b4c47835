#!/usr/bin/env python3
# Field tier, on the host: the container image of the guest's pods, written by hand (no registry is
# reachable): a one-layer OCI image archive for `ctr images import`, and the same files as a plain
# tar for podman's --rootfs. The layer holds Debian 13's busybox-static and util-linux's coresched
# with the two libraries it links (libc, the loader), all taken from the Debian 13 root, so a
# container can read its own cookie with `coresched get` as its very first instruction.
#
# Extra HOST_FILE=IMAGE_PATH arguments add files built on the host (the exec-window probe).
#
#   mkimage.py DEBIAN13_ROOT OUT_DIR REF [HOST_FILE=IMAGE_PATH...]
#                                            writes OUT_DIR/image.tar and OUT_DIR/rootfs.tar
"""Build the field tier's OCI image from files of the Debian 13 root."""

import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

FILES = [  # path in the image = path in the Debian 13 root
    "usr/bin/busybox",
    "usr/bin/coresched",
    "usr/lib/x86_64-linux-gnu/libc.so.6",
    "usr/lib64/ld-linux-x86-64.so.2",
]
APPLETS = ["sh", "sleep", "cat", "echo", "ls", "true", "mv"]
DIRS = ["bin", "dev", "etc", "proc", "run", "sys", "tmp", "usr", "usr/bin", "usr/lib", "usr/lib/x86_64-linux-gnu", "usr/lib64", "var"]
LINKS = {"lib": "usr/lib", "lib64": "usr/lib64", **{f"bin/{a}": "/usr/bin/busybox" for a in APPLETS}}


def info(name, kind, size=0, mode=0o755, target=""):
    t = tarfile.TarInfo(name)
    t.type, t.size, t.mode, t.linkname = kind, size, mode, target
    t.mtime, t.uid, t.gid, t.uname, t.gname = 0, 0, 0, "root", "root"
    return t


def inside(root, path, depth=0):
    """PATH of the Debian 13 root as a host path, symlinks resolved inside that root."""
    parts, done = path.strip("/").split("/"), ""
    for i, part in enumerate(parts):
        here = os.path.join(root, done, part)
        if os.path.islink(here):
            if depth > 20:
                raise SystemExit(f"mkimage.py: too many symlinks at {path}")
            target = os.readlink(here)
            rest = "/".join([target if target.startswith("/") else os.path.join(done, target)] + parts[i + 1 :])
            return inside(root, os.path.normpath(rest), depth + 1)
        done = os.path.join(done, part)
    return os.path.join(root, done)


def layer(root, extra):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        entries = [(d, "dir") for d in DIRS] + [(f, "file") for f in FILES] + [(k, "link") for k in LINKS]
        entries += [(name, "host") for name in extra]
        for name, kind in sorted(entries):
            if kind == "dir":
                tar.addfile(info(name, tarfile.DIRTYPE, mode=0o1777 if name == "tmp" else 0o755))
            elif kind == "link":
                tar.addfile(info(name, tarfile.SYMTYPE, mode=0o777, target=LINKS[name]))
            else:
                with open(extra[name] if kind == "host" else inside(root, name), "rb") as f:
                    data = f.read()
                tar.addfile(info(name, tarfile.REGTYPE, size=len(data)), io.BytesIO(data))
    return buf.getvalue()


def blob(tar, data):
    digest = hashlib.sha256(data).hexdigest()
    t = info(f"blobs/sha256/{digest}", tarfile.REGTYPE, size=len(data), mode=0o644)
    tar.addfile(t, io.BytesIO(data))
    return f"sha256:{digest}", len(data)


def main():
    root, out, ref = sys.argv[1:4]
    extra = {}
    for arg in sys.argv[4:]:
        src, sep, dest = arg.partition("=")
        if not sep or not dest.strip("/") or dest.strip("/") in FILES:
            raise SystemExit(f"mkimage.py: expected HOST_FILE=IMAGE_PATH (a new path), got {arg!r}")
        extra[dest.strip("/")] = src
    raw = layer(root, extra)
    with open(os.path.join(out, "rootfs.tar"), "wb") as f:
        f.write(raw)
    gz = gzip.compress(raw, mtime=0)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/usr/bin:/bin"], "Cmd": ["/bin/sleep", "3600"]},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]},
    }
    with tarfile.open(os.path.join(out, "image.tar"), "w", format=tarfile.PAX_FORMAT) as tar:
        for d in ["blobs", "blobs/sha256"]:
            tar.addfile(info(d, tarfile.DIRTYPE))
        layer_digest, layer_size = blob(tar, gz)
        cfg_digest, cfg_size = blob(tar, json.dumps(config, sort_keys=True).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cfg_digest, "size": cfg_size},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer_digest, "size": layer_size}],
        }
        man_digest, man_size = blob(tar, json.dumps(manifest, sort_keys=True).encode())
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": man_digest,
                    "size": man_size,
                    "platform": {"architecture": "amd64", "os": "linux"},
                    "annotations": {"org.opencontainers.image.ref.name": ref},
                }
            ],
        }
        for name, obj in [("oci-layout", {"imageLayoutVersion": "1.0.0"}), ("index.json", index)]:
            data = json.dumps(obj).encode()
            tar.addfile(info(name, tarfile.REGTYPE, size=len(data), mode=0o644), io.BytesIO(data))


if __name__ == "__main__":
    main()
