#!/usr/bin/env bash
# What CI can check of the images without a container engine or network:
#  1. images/dockerfile_check.py: the Dockerfile rules, package names against
#     bookworm, CUDA/cuDNN/NCCL pins against the build's toolkit, and that the
#     trainer's runtime packages cover every system library `hypertrain` links;
#  2. the operator image's filesystem: images/rootfs.sh assembles the same tree
#     the Dockerfile copies onto `scratch`, and the operator runs from it alone
#     (chroot, as user 65532): --version, --help, and a clean exit 2 for a
#     missing kubeconfig (the process started: every library was there).
set -uo pipefail
root=$PWD
operator=$root/operator/cmd/hypertrain-operator
trainer=$root/runtime/cmd/hypertrain
fail=0
python3 images/dockerfile_check.py "$root" "$trainer" || fail=1

passed=0
failed=0
ok() { echo "ok    $1"; passed=$((passed + 1)); }
bad() { echo "FAIL  $1"; failed=$((failed + 1)); }

tree=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rootfs.XXXXXX")
trap 'rm -rf "$tree"' EXIT
if images/rootfs.sh "$operator" "$tree" >"$tree.log" 2>&1; then ok "rootfs.sh assembles the operator's tree"; else
  bad "rootfs.sh assembles the operator's tree: $(cat "$tree.log")"
fi
[ ! -e "$tree/bin/sh" ] && [ ! -e "$tree/usr/bin/apt-get" ] && ok "the tree has no shell and no package manager" \
  || bad "the tree has a shell or a package manager"
grep -q '^nonroot:x:65532:65532:' "$tree/etc/passwd" && ok "/etc/passwd names user 65532" || bad "/etc/passwd lacks 65532"

# chroot needs root (CI runs as root); elsewhere a user namespace may do.
if [ "$(id -u)" -eq 0 ] && chroot "$tree" /usr/local/bin/hypertrain-operator --version >/dev/null 2>&1; then
  in_tree() { chroot --userspec=65532:65532 "$tree" "$@"; }
elif unshare -r chroot "$tree" /usr/local/bin/hypertrain-operator --version >/dev/null 2>&1; then
  in_tree() { unshare -r chroot "$tree" "$@"; }
else
  in_tree=""
fi
if ! declare -F in_tree >/dev/null; then
  if [ "$(id -u)" -eq 0 ]; then
    bad "the operator runs from its image tree: $(chroot "$tree" /usr/local/bin/hypertrain-operator --version 2>&1)"
  else
    echo "skip  running from the image tree: not root and no user namespaces for chroot"
  fi
else
  out=$(in_tree /usr/local/bin/hypertrain-operator --version 2>&1)
  [[ "$out" =~ ^hypertrain-operator\ [A-Za-z0-9._+-]+$ ]] && ok "--version from the image tree: $out" \
    || bad "--version from the image tree: $out"
  in_tree /usr/local/bin/hypertrain-operator --help | grep -q -- "--metrics-addr" \
    && ok "--help from the image tree" || bad "--help from the image tree"
  out=$(in_tree /usr/local/bin/hypertrain-operator --kubeconfig /nonexistent 2>&1)
  rc=$?
  [ "$rc" -eq 2 ] && grep -q "cannot load Kubernetes config" <<<"$out" \
    && ok "starts from the image tree and exits 2 without a kubeconfig" || bad "start from the image tree (exit $rc): $out"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$fail" -eq 0 ]
