#!/usr/bin/env python3
"""Writes a one-layer OCI image archive from a root filesystem directory.

    tools/oci_image.py --rootfs DIR --ref NAME:TAG --out FILE.tar
        [--user UID:GID] [--entrypoint JSON] [--cmd JSON] [--env K=V ...]
        [--workdir DIR] [--owner PATH=UID:GID ...]

The archive is an OCI image layout (oci-layout, index.json, blobs/sha256/...)
that `ctr -n k8s.io images import FILE.tar` loads under NAME:TAG, no registry
involved. Reproducible: entries sorted, every mtime SOURCE_DATE_EPOCH (0 by
default), owner 0:0 unless --owner names the path, gzip without a name or time.
Used by tools/oci-images.sh.
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import stat
import sys
import tarfile

EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))


def fail(msg):
    print(f"oci_image: {msg}", file=sys.stderr)
    sys.exit(2)


def tar_info(name, st, owners):
    ti = tarfile.TarInfo(name)
    ti.mtime = EPOCH
    ti.mode = stat.S_IMODE(st.st_mode)
    ti.uid, ti.gid = owners.get(name, (0, 0))
    ti.uname = ti.gname = ""
    return ti


class HashingWriter:
    """A file object that writes through to `f` and hashes what passes."""

    def __init__(self, f):
        self.f, self.h, self.size = f, hashlib.sha256(), 0

    def write(self, data):
        self.h.update(data)
        self.size += len(data)
        return self.f.write(data)

    def tell(self):
        return self.size

    def flush(self):
        self.f.flush()


def write_layer(rootfs, owners, out, compression):
    """Writes the root filesystem as a tar (entries sorted) to `out`; returns
    (diff_id, digest, size) of the uncompressed tar and of the blob."""
    paths = []
    for dirpath, dirnames, filenames in os.walk(rootfs):
        for name in dirnames + filenames:
            paths.append(os.path.relpath(os.path.join(dirpath, name), rootfs))
    blob = HashingWriter(out)
    gz = gzip.GzipFile(fileobj=blob, mode="wb", mtime=0, filename="", compresslevel=6) if compression == "gzip" else None
    raw = HashingWriter(gz if gz else blob)
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in sorted(paths):
            path = os.path.join(rootfs, rel)
            st = os.lstat(path)
            ti = tar_info(rel, st, owners)
            if stat.S_ISDIR(st.st_mode):
                ti.type = tarfile.DIRTYPE
                tar.addfile(ti)
            elif stat.S_ISLNK(st.st_mode):
                ti.type = tarfile.SYMTYPE
                ti.linkname = os.readlink(path)
                tar.addfile(ti)
            elif stat.S_ISREG(st.st_mode):
                ti.size = st.st_size
                with open(path, "rb") as f:
                    tar.addfile(ti, f)
            else:
                fail(f"{path}: only directories, files and symlinks go into an image")
    if gz:
        gz.close()
    return "sha256:" + raw.h.hexdigest(), "sha256:" + blob.h.hexdigest(), blob.size


def blob(blobs, data, media_type):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rootfs", required=True)
    ap.add_argument("--ref", required=True, help="image name with tag, e.g. localhost/hypertrain:local")
    ap.add_argument("--out", required=True)
    ap.add_argument("--user", default="")
    ap.add_argument("--entrypoint", default="null", help="JSON list")
    ap.add_argument("--cmd", default="null", help="JSON list")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--workdir", default="")
    ap.add_argument("--owner", action="append", default=[], help="PATH=UID:GID (PATH relative to the rootfs)")
    ap.add_argument("--compression", choices=["gzip", "none"], default="gzip",
                    help="of the layer (none: faster for large local images)")
    a = ap.parse_args()
    if not os.path.isdir(a.rootfs):
        fail(f"--rootfs {a.rootfs} is not a directory")
    if ":" not in a.ref.rsplit("/", 1)[-1]:
        fail(f"--ref {a.ref} needs a tag (NAME:TAG)")
    owners = {}
    for o in a.owner:
        path, _, ids = o.partition("=")
        uid, _, gid = ids.partition(":")
        if not path or not uid.isdigit() or not gid.isdigit():
            fail(f"--owner {o}: expected PATH=UID:GID")
        owners[os.path.normpath(path)] = (int(uid), int(gid))
    try:
        entrypoint, cmd = json.loads(a.entrypoint), json.loads(a.cmd)
    except json.JSONDecodeError as e:
        fail(f"--entrypoint/--cmd must be JSON lists: {e}")

    layer_file = a.out + ".layer.tmp"
    with open(layer_file, "wb") as f:
        diff_id, layer_digest, layer_size = write_layer(a.rootfs, owners, f, a.compression)
    media = "application/vnd.oci.image.layer.v1.tar" + ("+gzip" if a.compression == "gzip" else "")
    layer = {"mediaType": media, "digest": layer_digest, "size": layer_size}
    blobs = {}
    config = {"User": a.user, "Env": a.env, "WorkingDir": a.workdir}
    if entrypoint is not None:
        config["Entrypoint"] = entrypoint
    if cmd is not None:
        config["Cmd"] = cmd
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    cfg = blob(blobs, json.dumps(image_config, sort_keys=True).encode(), "application/vnd.oci.image.config.v1+json")
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": cfg, "layers": [layer]}
    man = blob(blobs, json.dumps(manifest, sort_keys=True).encode(), "application/vnd.oci.image.manifest.v1+json")
    man["annotations"] = {"io.containerd.image.name": a.ref,
                          "org.opencontainers.image.ref.name": a.ref.rsplit(":", 1)[1]}
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [man]}

    files = {"oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
             "index.json": json.dumps(index, sort_keys=True).encode()}
    for digest, data in blobs.items():
        files["blobs/sha256/" + digest.split(":", 1)[1]] = data
    files["blobs/sha256/" + layer_digest.split(":", 1)[1]] = None  # streamed from layer_file
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for d in ("blobs", "blobs/sha256"):
                ti = tarfile.TarInfo(d)
                ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, EPOCH
                tar.addfile(ti)
            for name in sorted(files):
                ti = tarfile.TarInfo(name)
                ti.mode, ti.mtime = 0o644, EPOCH
                if files[name] is None:
                    ti.size = layer_size
                    with open(layer_file, "rb") as lf:
                        tar.addfile(ti, lf)
                else:
                    ti.size = len(files[name])
                    tar.addfile(ti, io.BytesIO(files[name]))
        f.flush()
        os.fsync(f.fileno())
    os.unlink(layer_file)
    os.rename(tmp, a.out)
    print(f"{a.ref} {man['digest']} {a.out}")


if __name__ == "__main__":
    main()
