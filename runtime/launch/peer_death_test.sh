#!/usr/bin/env bash
# A rank that dies names itself and its node, and the survivors name it
# (issue 18): `launch`, 2 nodes x 2 ranks (Gloo on 127.0.0.1), SIGKILL to
# global rank 3 (node 1, local rank 1) mid-training. Node 1's launcher says
# "rank 3 (node 1, host <host>, ...) exited with signal 9"; node 0's ranks,
# whose collectives fail, say which peer rank (and node) closed the
# connection instead of only "connection reset by peer <address>"; both
# launchers exit with a retryable code (not 0, not 2).
set -euo pipefail
source runtime/testing/cli_test_lib.sh
cli_test_init peer_death

prepare_text_data "$TMP/data"

port=$((20000 + (RANDOM % 20000)))
for node in 0 1; do
  env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port NNODES=2 NODE_RANK=$node HYPERTRAIN_JOB_NAME=peer \
    HT_GLOO_HOSTNAME=127.0.0.1 HT_RENDEZVOUS_TIMEOUT_S=60 \
    timeout 180 "$BIN" launch --nproc-per-node 2 --grace-period-s 10 -- train --config "$CONFIG" \
    --set model.data.train_dir="$TMP/data" --set trainer.log_every_n_steps=1 --set model.train_batch_size=2 \
    --set model.max_context_width=32 --set model.num_hidden_layers=2 --set trainer.max_steps=100000 \
    --set exp_manager.every_n_train_steps=100000 --set exp_manager.exp_dir="$TMP/exp" \
    > "$TMP/node$node.log" 2>&1 &
  eval "LAUNCHER$node=$!"
done

for _ in $(seq 1 1200); do
  grep -q "step 5/" "$TMP/node0.log" 2>/dev/null && break
  sleep 0.05
done
grep -q "step 5/" "$TMP/node0.log" || { cat "$TMP/node0.log" "$TMP/node1.log"; fail "training never reached step 5"; }

# Global rank 3: the child of node 1's launcher (under `timeout`) with RANK=3.
victim=""
for p in $(pgrep -P "$(pgrep -P "$LAUNCHER1" | head -1)" || true); do
  if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "RANK=3"; then victim=$p; fi
done
[ -n "$victim" ] || { ps -ef --forest | grep -v grep | grep -A3 "$LAUNCHER1" >&2; fail "no rank 3 process under node 1's launcher"; }
kill -KILL "$victim"

rc0=0; rc1=0
wait "$LAUNCHER1" || rc1=$?
wait "$LAUNCHER0" || rc0=$?
echo "launchers exited $rc0 (node 0) / $rc1 (node 1)"
host=$(hostname)

grep -q "rank 3 (node 1, host $host, local rank 1, pid $victim) exited with signal 9 (Killed) -> code 137" \
  "$TMP/node1.log" || { cat "$TMP/node1.log"; fail "node 1's launcher does not name rank 3, node 1, host $host and signal 9"; }
[ "$rc1" -eq 137 ] || { cat "$TMP/node1.log"; fail "node 1's launcher exited $rc1, want 137 (its first failure)"; }
echo "PASS: node 1: rank 3 (node 1, host $host) exited with signal 9, launcher exit 137"

# Node 0's ranks talk to rank 3 (world group) and rank 2 (replica group),
# which node 1's launcher stops after rank 3 died: either may be the first
# connection to fail, but the peer is named by rank and node, not by address.
grep -qE "peer rank [23] \(node 1, host $host, \[127\.0\.0\.1\]:[0-9]+\) closed the connection: that rank exited or its node was lost" \
  "$TMP/node0.log" || { cat "$TMP/node0.log"; fail "node 0's ranks do not name the peer rank and node that closed the connection"; }
case "$rc0" in
  200|201|143) ;;
  *) cat "$TMP/node0.log"; fail "node 0's launcher exited $rc0, want a retryable code (200, 201 or 143)" ;;
esac
echo "PASS: node 0: $(grep -oE "peer rank [23] \(node 1, [^)]*\) closed the connection" "$TMP/node0.log" | head -1), launcher exit $rc0"
echo "2 passed, 0 failed"
