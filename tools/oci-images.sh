#!/usr/bin/env bash
# Builds OCI image archives without a registry or a container engine, for the
# local real node (containerd + kubelet, localcluster/envtest/real-node.sh):
#   tools/oci-images.sh OUT_DIR [BIN_DIR]
#     BIN_DIR  where hypertrain-operator and hypertrain are (default: bazel-bin's
#              operator/cmd and runtime/cmd; build them first)
# writes, each loadable with `ctr -n k8s.io images import FILE`:
#   OUT_DIR/operator.tar  localhost/hypertrain-operator:local  user 65532, ENTRYPOINT /usr/local/bin/hypertrain-operator
#   OUT_DIR/trainer.tar   localhost/hypertrain:local           user 1000, WORKDIR /home/hypertrain, CMD hypertrain --help
#   OUT_DIR/pause.tar     localhost/pause:local                user 65535, the sandbox process (images/pause.c)
# Same users, paths and entrypoints as the runtime stages of images/*.Dockerfile,
# on a minimal root filesystem (images/rootfs.sh: the binary and its ldd
# closure). The trainer is whatever build BIN_DIR holds (the CPU build here: no
# CUDA, NCCL or EFA libraries; a CUDA build brings its CUDA libraries, ~1 GB).
# Reproducible: same binaries, same digests. Layers are gzipped, or plain tar
# with HT_OCI_COMPRESSION=none (faster for a large trainer; local use only).
set -euo pipefail
R="$(cd "$(dirname "$0")/.." && pwd)"
usage() { echo "usage: tools/oci-images.sh OUT_DIR [BIN_DIR]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
out=$1
op_bin="${2:-$R/bazel-bin/operator/cmd}/hypertrain-operator"
tr_bin="${2:-$R/bazel-bin/runtime/cmd}/hypertrain"
for b in "$op_bin" "$tr_bin"; do
  [ -x "$b" ] || { echo "oci-images: $b is missing (bazel build //operator/cmd:hypertrain-operator //runtime/cmd:hypertrain)" >&2; exit 2; }
done
command -v cc > /dev/null || { echo "oci-images: no C compiler (cc) for images/pause.c" >&2; exit 1; }
mkdir -p "$out"
work="$(mktemp -d "${TMPDIR:-/tmp}/oci-images.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-0}"
oci_image() { python3 "$R/tools/oci_image.py" --compression "${HT_OCI_COMPRESSION:-gzip}" "$@"; }

# Operator: images/operator.Dockerfile's scratch stage.
"$R/images/rootfs.sh" "$op_bin" "$work/operator"
oci_image --rootfs "$work/operator" --ref localhost/hypertrain-operator:local \
  --out "$out/operator.tar" --user 65532:65532 --entrypoint '["/usr/local/bin/hypertrain-operator"]'

# Trainer: images/trainer.Dockerfile's runtime stage (user 1000, its home).
"$R/images/rootfs.sh" "$tr_bin" "$work/trainer"
printf 'root:x:0:0:root:/root:/sbin/nologin\nhypertrain:x:1000:1000::/home/hypertrain:/sbin/nologin\n' > "$work/trainer/etc/passwd"
printf 'root:x:0:\nhypertrain:x:1000:\n' > "$work/trainer/etc/group"
mkdir -p "$work/trainer/home/hypertrain"
oci_image --rootfs "$work/trainer" --ref localhost/hypertrain:local \
  --out "$out/trainer.tar" --user 1000:1000 --workdir /home/hypertrain --cmd '["hypertrain", "--help"]' \
  --env PATH=/usr/local/bin:/usr/bin:/bin --owner home/hypertrain=1000:1000

# Pause: one static binary (as the upstream pause image, user 65535).
mkdir -p "$work/pause/usr/local/bin"
cc -static -Os -s -o "$work/pause/usr/local/bin/pause" "$R/images/pause.c"
oci_image --rootfs "$work/pause" --ref localhost/pause:local \
  --out "$out/pause.tar" --user 65535:65535 --entrypoint '["/usr/local/bin/pause"]'
