#!/usr/bin/env bash
# Distributed start-up and hangs (issue 40, item 5), with real launchers and
# Gloo on 127.0.0.1:
#  1. A second launcher with NODE_RANK=1 while nodes 0 and 1 train: it exits 2
#     within seconds (not the rendezvous timeout) naming both launchers (host,
#     pid), and the running job keeps training.
#  2. The same with NODE_RANK=0 (whose rank 0 cannot serve the store: the port
#     is the running job's): exit 2 naming both.
#  3. A rank stopped with SIGSTOP mid-training: the other rank's collective
#     watchdog names the stopped rank (host, pid), not only the collective,
#     and exits 201.
set -euo pipefail
source runtime/testing/cli_test_lib.sh
cli_test_init duplicate_rank
prepare_text_data "$TMP/data"
passed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
port=$((20000 + (RANDOM % 20000)))

# One job's launchers share one exp_dir ("dup-node1-n0" and "-n1" use exp-dup-node1), as
# nodes share a file system: rank 0 commits a checkpoint once every rank's file is there
# (with a directory per node, the stop's final save waited out the 30 s grace period).
# The duplicate has its own: the job's holds the directory lock.
start() {  # $1 = log name, $2 = node rank, $3 = nnodes, $4 = nproc, rest = extra train args; sets PID
  local name="$1" n="$2" nn="$3" np="$4"; shift 4
  env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port NNODES=$nn NODE_RANK=$n HYPERTRAIN_JOB_NAME=dup \
    HT_GLOO_HOSTNAME=127.0.0.1 HT_RENDEZVOUS_TIMEOUT_S=60 \
    timeout --foreground 300 "$BIN" launch --nproc-per-node "$np" --grace-period-s 2 -- train --config "$CONFIG" \
    --set model.data.train_dir="$TMP/data" --set trainer.log_every_n_steps=1 --set model.train_batch_size=2 \
    --set model.max_context_width=32 --set model.num_hidden_layers=2 --set trainer.max_steps=100000 \
    --set exp_manager.every_n_train_steps=100000 --set exp_manager.exp_dir="$TMP/exp-${name%-n[01]}" "$@" \
    > "$TMP/$name.log" 2>&1 &
  PID=$!
}
wait_step() {  # $1 = log name, $2 = step
  for _ in $(seq 1 1200); do
    grep -q "step $2/" "$TMP/$1.log" 2>/dev/null && return 0
    sleep 0.05
  done
  cat "$TMP/$1.log"; fail "$1: training never reached step $2"
}
last_step() { grep -o "step [0-9]*/" "$TMP/$1.log" | tail -1 | tr -dc 0-9; }
# --foreground: timeout passes stop()'s SIGTERM to the launcher alone. Without
# it, timeout also signals its process group (launcher and ranks), the launcher
# takes the second signal as "now" and SIGKILLs its ranks mid-collective, and
# the other node's ranks could wait out the 30 s collective timeout.
stop() {  # $@ = launcher pids: SIGTERM, then wait
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "$@"; do wait "$p" || true; done
}

duplicate() {  # $1 = case, $2 = duplicated node rank
  local name="$1" dup="$2"
  port=$((20000 + (RANDOM % 20000)))
  start "$name-n0" 0 2 2; local n0=$PID
  start "$name-n1" 1 2 2; local n1=$PID
  wait_step "$name-n0" 2
  local t0; t0=$(date +%s%N)
  start "$name-dup" "$dup" 2 2
  local rc=0; wait "$PID" || rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  [ "$rc" -eq 2 ] || { stop "$n0" "$n1"; cat "$TMP/$name-dup.log"; fail "$name: the duplicate exited $rc, want 2"; }
  [ "$ms" -lt 30000 ] || fail "$name: the duplicate took ${ms} ms (rendezvous timeout 60 s)"
  local want="NODE_RANK=$dup is claimed twice in the rendezvous"
  grep -q "$want.*first by host $(hostname) (launcher pid [0-9]*), now by host $(hostname) (launcher pid [0-9]*)" \
    "$TMP/$name-dup.log" || { stop "$n0" "$n1"; cat "$TMP/$name-dup.log"; fail "$name: no message naming both"; }
  # The running job goes on.
  local before; before=$(last_step "$name-n0")
  wait_step "$name-n0" $((before + 3))
  kill -0 "$n0" && kill -0 "$n1" || fail "$name: the running job stopped"
  stop "$n0" "$n1"
  pass "$name: a second NODE_RANK=$dup exits 2 in ${ms} ms naming both launchers; the job trains on past step $before"
}
duplicate dup-node1 1
duplicate dup-node0 0

# --- 3. A stopped rank: the watchdog names it.
descendants() {  # $1 = pid: every descendant's pid
  local c
  for c in $(pgrep -P "$1" || true); do echo "$c"; descendants "$c"; done
}
port=$((20000 + (RANDOM % 20000)))
start hang 0 1 2 --set trainer.collective_timeout=3
launcher=$PID
wait_step hang 3
victim=""
for _ in $(seq 1 100); do
  for p in $(descendants "$launcher"); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "RANK=1"; then victim=$p; fi
  done
  [ -n "$victim" ] && break
  sleep 0.1
done
[ -n "$victim" ] || fail "no rank 1 process under the launcher (pid $launcher)"
kill -STOP "$victim"
rc=0; wait "$launcher" || rc=$?
kill -KILL "$victim" 2>/dev/null || true
[ "$rc" -eq 201 ] || { cat "$TMP/hang.log"; fail "hang: launcher exit $rc, want 201"; }
grep -q "collective watchdog: .*did not finish within 3.0s.*stopped: rank 1 (host $(hostname) pid $victim, node rank 0, local rank 1)" \
  "$TMP/hang.log" || { cat "$TMP/hang.log"; fail "hang: the report does not name rank 1 and its pid $victim"; }
pass "hang: rank 0's watchdog names the stopped rank 1 (pid $victim) and exits 201"
echo "duplicate_rank_test: $passed passed"
