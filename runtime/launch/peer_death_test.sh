#!/usr/bin/env bash
# A rank that dies names itself and its node, and the survivors name it
# (issue 18): `launch`, 2 nodes x 2 ranks (Gloo on 127.0.0.1), SIGKILL to one
# rank mid-training.
#  1. Rank 3 (node 1, local rank 1): node 1's launcher says "rank 3 (node 1,
#     host <host>, ...) exited with signal 9" and exits 137; node 0's ranks,
#     whose collectives fail, name the peer rank, node and host that closed
#     the connection (not only "connection reset by peer <address>") and exit
#     200 (retryable).
#  2. Rank 0, which serves the rendezvous store: the peers cannot look the
#     address up, and say so (the store at <address> does not answer) within
#     seconds instead of hanging; node 1 exits retryable.
set -euo pipefail
source runtime/testing/cli_test_lib.sh
cli_test_init peer_death
prepare_text_data "$TMP/data"
host=$(hostname)

descendants() {  # $1 = pid: every descendant's pid
  local c
  for c in $(pgrep -P "$1" || true); do
    echo "$c"
    descendants "$c"
  done
}

run() {  # $1 = case name, $2 = victim's global rank, $3 = its node; sets rc0, rc1, victim
  local name="$1" rank="$2" node="$3" port=$((20000 + (RANDOM % 20000)))
  for n in 0 1; do
    env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port NNODES=2 NODE_RANK=$n HYPERTRAIN_JOB_NAME=peer \
      HT_GLOO_HOSTNAME=127.0.0.1 HT_RENDEZVOUS_TIMEOUT_S=60 \
      timeout 180 "$BIN" launch --nproc-per-node 2 --grace-period-s 10 -- train --config "$CONFIG" \
      --set model.data.train_dir="$TMP/data" --set trainer.log_every_n_steps=1 --set model.train_batch_size=2 \
      --set model.max_context_width=32 --set model.num_hidden_layers=2 --set trainer.max_steps=100000 \
      --set exp_manager.every_n_train_steps=100000 --set exp_manager.exp_dir="$TMP/$name" \
      > "$TMP/$name.node$n.log" 2>&1 &
    eval "LAUNCHER$n=$!"
  done
  for _ in $(seq 1 1200); do
    grep -q "step 5/" "$TMP/$name.node0.log" 2>/dev/null && break
    sleep 0.05
  done
  grep -q "step 5/" "$TMP/$name.node0.log" || { cat "$TMP/$name.node"*.log; fail "$name: training never reached step 5"; }
  # The victim: the process with RANK=<rank> among the descendants of its
  # node's launcher (under `timeout`), looked for by PID for up to 10 s.
  local launcher; eval "launcher=\$LAUNCHER$node"
  victim=""
  for _ in $(seq 1 100); do
    for p in $(descendants "$launcher"); do
      if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$rank"; then victim=$p; fi
    done
    [ -n "$victim" ] && break
    sleep 0.1
  done
  [ -n "$victim" ] || { ps -o pid,ppid,args -e --forest | grep -v grep | grep -A4 "$launcher" || true
    fail "$name: no rank $rank process under node $node's launcher (pid $launcher)"; }
  kill -KILL "$victim"
  rc0=0; rc1=0
  wait "$LAUNCHER0" || rc0=$?
  wait "$LAUNCHER1" || rc1=$?
  echo "$name: launchers exited $rc0 (node 0) / $rc1 (node 1)"
  grep -q "rank $rank (node $node, host $host, local rank $((rank % 2)), pid $victim) exited with signal 9 (Killed) -> code 137" \
    "$TMP/$name.node$node.log" ||
    { cat "$TMP/$name.node$node.log"; fail "$name: node $node's launcher does not name rank $rank, node $node, host $host and signal 9"; }
}
retryable() {  # $1 = code, $2 = what
  case "$1" in
    200|201|143) ;;
    *) fail "$2 exited $1, want a retryable code (200, 201 or 143)" ;;
  esac
}

run rank3 3 1
[ "$rc1" -eq 137 ] || { cat "$TMP/rank3.node1.log"; fail "node 1's launcher exited $rc1, want 137 (its first failure)"; }
echo "PASS: node 1: rank 3 (node 1, host $host) exited with signal 9, launcher exit 137"
# Node 0's ranks talk to rank 3 (world group) and rank 2 (replica group),
# which node 1's launcher stops after rank 3 died: either may be the first
# connection to fail, but the peer is named by rank, node and host.
named='peer rank [23] \(node 1, host [^,]*, \[127\.0\.0\.1\]:[0-9]+\) closed the connection: that rank exited or its node was lost'
grep -qE "$named" "$TMP/rank3.node0.log" ||
  { cat "$TMP/rank3.node0.log"; fail "node 0's ranks do not name the peer rank and node that closed the connection"; }
retryable "$rc0" "node 0's launcher"
echo "PASS: node 0: $(grep -oE "peer rank [23] \(node 1, [^)]*\) closed the connection" "$TMP/rank3.node0.log" | head -1), launcher exit $rc0"

run rank0 0 0
[ "$rc0" -eq 137 ] || { cat "$TMP/rank0.node0.log"; fail "node 0's launcher exited $rc0, want 137"; }
grep -qE "its rank is unknown: the store at 127\.0\.0\.1:[0-9]+ does not answer \(rank 0 serves it\)|peer rank [01] \(node 0, " \
  "$TMP/rank0.node1.log" || { cat "$TMP/rank0.node1.log"; fail "node 1's ranks neither name the peer nor say the store is gone"; }
retryable "$rc1" "node 1's launcher"
echo "PASS: rank 0 (the store) killed: node 1 says $(grep -oE "its rank is unknown: [^;]*\(rank 0 serves it\)|peer rank [01] \(node 0, [^)]*\)" "$TMP/rank0.node1.log" | head -1), exit $rc1"
echo "3 passed, 0 failed"
