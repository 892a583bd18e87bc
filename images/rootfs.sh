#!/usr/bin/env bash
# Assembles a minimal root filesystem for one dynamically linked binary: the
# binary at /usr/local/bin, every shared library it loads (ldd's closure, at
# the paths ldd resolves), the dynamic loader, CA certificates, an /etc/passwd
# and /etc/group naming the non-root user 65532 ("nonroot"), and an empty
# /tmp. The operator image is exactly this tree on `FROM scratch`
# (images/operator.Dockerfile); image_check_test.sh builds the same tree
# and runs the binary inside it with chroot.
#   images/rootfs.sh BINARY DEST
set -euo pipefail
bin=${1:?usage: rootfs.sh BINARY DEST}
dest=${2:?usage: rootfs.sh BINARY DEST}
[ -x "$bin" ] || { echo "rootfs.sh: $bin is not an executable" >&2; exit 2; }
umask 022
mkdir -p "$dest/usr/local/bin" "$dest/etc/ssl/certs" "$dest/tmp"
chmod 0755 "$dest"  # the root of the image: every user traverses it
chmod 1777 "$dest/tmp"
install -m 0755 "$(readlink -f "$bin")" "$dest/usr/local/bin/$(basename "$bin")"
copy() {  # copies the file behind $1 to the same path under $dest
  mkdir -p "$dest$(dirname "$1")"
  cp -L "$1" "$dest$1"
}
ldd_out=$(ldd "$bin") || { echo "rootfs.sh: ldd $bin failed" >&2; exit 1; }
if grep -q "not found" <<<"$ldd_out"; then
  echo "rootfs.sh: $bin has unresolved libraries:" >&2
  grep "not found" <<<"$ldd_out" >&2
  exit 1
fi
while read -r lib; do copy "$lib"; done < <(awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' <<<"$ldd_out")
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$dest/etc/ssl/certs/"
fi
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$dest/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$dest/etc/group"
