#!/usr/bin/env bash
# End to end on real processes: kube-local + node agent + operator; a
# TrainingJob of 2 nodes x 2 CPU ranks; one trainer pod's process is killed
# with SIGKILL mid-run -> the operator restarts the gang -> the trainer
# resumes from the latest checkpoint; then `kubectl delete pod` (SIGTERM) ->
# every rank finishes its step and saves it -> the next attempt resumes at
# exactly that step -> Succeeded, and the final checkpoint's parameters are
# byte-identical to an uninterrupted run of the same layout.
# This is tools/local-e2e.sh with the reference check on, on byte tokens (the
# demo's Llama-2 vocab makes the model ~10x slower on CPU; the real tokenizer's
# path to training is runtime/cmd:data_cli_test); with the argument --real, on
# real Kubernetes (tools/local-e2e.sh --real): the envtest control plane, two
# real nodes (containerd + kubelet), the operator in its container installed by
# the Helm chart, the trainer pods under kubelet (skipped, saying why, without
# the control plane's binaries or where real nodes cannot run).
set -euo pipefail
R="$PWD"
MODE=()
if [ "${1:-}" = --real ]; then
  . "$R/localcluster/envtest/envtest.sh"
  envtest_require "$R/localcluster/envtest/kube-envtest"
  envtest_require_real_node "$R/localcluster/envtest/real-node.sh"
  MODE=(--real)
fi
# Real nodes: what the teardown must leave as it found (as realnode_test checks).
host_state() {
  local s
  for s in vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops; do printf '%s=%s ' "$s" "$(cat "/proc/sys/$s")"; done
  ls -d /run/containerd /run/netns /run/netns/* /var/log/pods /var/log/containers /var/lib/kubelet \
    /sys/fs/cgroup/*/hypertrain-node-* /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/k8s.io /tmp/ht-node.* 2> /dev/null |
    tr '\n' ' ' || true
}
BEFORE="$(host_state)"
BIN="$(mktemp -d "${TEST_TMPDIR:-/tmp}/bin.XXXXXX")"
for b in localcluster/apiserver/kube-local localcluster/nodeagent/node-agent operator/cmd/hypertrain-operator \
         runtime/cmd/hypertrain localcluster/envtest/kube-envtest; do
  ln -s "$R/$b" "$BIN/$(basename "$b")"
done
# On real nodes the trainer's image holds the CPU build: the CUDA build's image
# carries ~0.9 GB of CUDA libraries this CPU job never loads, and each node
# imports it (~20 s a node on CI's disk).
[ "${#MODE[@]}" = 0 ] || ln -sf "$R/runtime/cmd/hypertrain_cpu" "$BIN/hypertrain"
out="$(mktemp "${TEST_TMPDIR:-/tmp}/out.XXXXXX")"
HT_TOKENIZER=bytes HT_BIN_DIR="$BIN" HT_LOCAL_DIR="${TEST_TMPDIR:-/tmp}/e2e" HT_MAX_STEPS=200 HT_CKPT_EVERY=10 HT_KILL_AT_STEP=25 HT_DELETE_AT_STEP=45 \
  HT_VERIFY_REFERENCE=1 HT_REQUIRE_PROGRESS=1 HT_TIMEOUT_S=200 "$R/tools/local-e2e.sh" "${MODE[@]}" > "$out" 2>&1 || {
  cat "$out"
  for f in "${TEST_TMPDIR:-/tmp}"/e2e/logs/*.log; do echo "== $f"; tail -n 30 "$f"; done
  exit 1
}
cat "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
# Restarting is transient (a fast gang restart can pass between two polls of the
# state), so the proof is what it leaves behind: the Restarting condition in
# status.conditions and the gang-restart Event.
grep -qE "^ +Restarting=(True|False) " "$out" || fail "no Restarting condition in the job's status"
grep -q "PodFailed .*gang restart 1 after pod" "$out" || fail "no gang-restart Event"
grep -q "state=Succeeded restarts=2" "$out" || fail "not Succeeded after two restarts (kill -9, kubectl delete pod)"
grep -q "attempt 2 resumed from the checkpoint of step" "$out" || fail "no resume from a checkpoint"
grep -q "the next attempt resumed at step [0-9]*: 0 lost steps" "$out" || fail "kubectl delete pod: no resume at the stop step"
grep -q "shard files identical to the uninterrupted run" "$out" || fail "final parameters not compared"
if [ "${#MODE[@]}" -gt 0 ]; then
  nodes="${TEST_TMPDIR:-/tmp}/e2e/nodes"
  for f in "$nodes"/node-*.address; do
    sock="$(cat "$f")"
    for c in /proc/[0-9]*/cmdline; do
      if { tr '\0' ' ' < "$c"; } 2> /dev/null | grep -qF -- "$sock"; then fail "a process of $sock is left: $(tr '\0' ' ' < "$c")"; fi
    done
  done
  pgrep -f "$nodes" > /dev/null && fail "processes of $nodes left: $(pgrep -af "$nodes")"
  grep -F "$nodes" /proc/mounts && fail "mounts under $nodes left"
  AFTER="$(host_state)"
  [ "$AFTER" = "$BEFORE" ] || fail "the host changed: before [$BEFORE] after [$AFTER]"
  echo "teardown: no process, shim or mount left; cgroups, /run/containerd, netns and kernel settings as before"
fi
echo PASS
