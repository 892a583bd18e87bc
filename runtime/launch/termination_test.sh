#!/usr/bin/env bash
# Graceful termination through the real binary (docs/DISTRIBUTED.md
# "Termination"; issue 18): SIGTERM at a random step makes the trainer finish
# that step, save it and exit 143, and the next start resumes at exactly that
# step (0 lost steps) with the same loss trajectory as a run never stopped;
# also while a checkpoint is written every step, under `launch` with 2 nodes x
# 2 ranks (SIGTERM to one node's launcher stops all four ranks at one step), a
# grace budget too small to save (no save, resume from the earlier one), and
# a second signal (exit at once), a plain `train` whose OpenBLAS threads
# predate the signal mask (issue 40), and SIGTERM during rendezvous (exit at once).
set -euo pipefail
BIN="${HYPERTRAIN_BIN:-$PWD/runtime/cmd/hypertrain}"
CONFIG="$PWD/examples/tiny-cpu.yaml"
TMP="$(mktemp -d "${TEST_TMPDIR:-/tmp}/termination.XXXXXX")"
fail() { echo "FAIL: $*" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
passed=0

inputs=(/usr/share/common-licenses/*)
if [ ! -e "${inputs[0]}" ]; then
  for i in $(seq 1 3000); do echo "line $i: the quick brown fox jumps over the lazy dog"; done > "$TMP/gen.txt"
  inputs=("$TMP/gen.txt")
fi
"$BIN" prepare --out "$TMP/data" --tokens-per-shard 100000 "${inputs[@]}" 2> "$TMP/prepare.log"

# A constant learning rate: the trajectory does not depend on max_steps, so a
# stopped-and-resumed run can be compared step by step with one never stopped.
COMMON=(--config "$CONFIG" --set model.data.train_dir="$TMP/data" --set trainer.log_every_n_steps=1
        --set model.train_batch_size=2 --set model.max_context_width=32 --set model.num_hidden_layers=2
        --set model.activation_checkpointing=none --set model.optim.sched.name=constant
        --set model.optim.sched.warmup_steps=0)

# "step loss" of every metrics line, by step.
losses() { python3 -c '
import json, sys
seen = {}
for l in open(sys.argv[1]):
    j = json.loads(l); seen[j["step"]] = j["loss"]
for s in sorted(seen): print(s, repr(seen[s]))' "$1"; }

wait_for_step() {  # $1 = log, $2 = step
  for _ in $(seq 1 1200); do
    grep -q "step $2/" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  cat "$1"; fail "step $2 never logged"
}

stop_step() { sed -n 's/.*stopping after step \([0-9]*\) on request.*/\1/p' "$1" | head -1; }
resume_step() { sed -n 's/.*resumed at step \([0-9]*\) .*/\1/p' "$1" | head -1; }

# The reference: 24 steps, never stopped.
"$BIN" train "${COMMON[@]}" --set trainer.max_steps=24 --set exp_manager.exp_dir="$TMP/ref" \
  > "$TMP/ref.log" 2>&1 || { cat "$TMP/ref.log"; fail "reference run"; }
losses "$TMP/ref/metrics.jsonl" > "$TMP/ref.losses"

# 1. One process: SIGTERM at a random step; checkpoints otherwise only every
#    1000 steps, so only the stop's own save can make the resume exact.
run_and_stop() {  # $1 = name, $2 = first step to signal after, rest = extra train args
  local name="$1" at="$2"; shift 2
  "$BIN" train "${COMMON[@]}" --set trainer.max_steps=24 --set exp_manager.exp_dir="$TMP/$name" \
    --set exp_manager.every_n_train_steps=1000 "$@" > "$TMP/$name.log" 2>&1 &
  local pid=$!
  wait_for_step "$TMP/$name.log" "$at"
  kill -TERM $pid
  local rc=0
  wait $pid || rc=$?
  [ $rc -eq 143 ] || { cat "$TMP/$name.log"; fail "$name: exit $rc after SIGTERM, want 143"; }
}
at=$((3 + RANDOM % 8))
run_and_stop single "$at"
n=$(stop_step "$TMP/single.log")
[ -n "$n" ] && [ "$n" -ge "$at" ] && [ "$n" -lt 24 ] || { cat "$TMP/single.log"; fail "no stop step (signalled after step $at)"; }
grep -q "its checkpoint is written: the next start resumes at step $n" "$TMP/single.log" || fail "stop line"
[ -d "$TMP/single/checkpoints/step-$n" ] || fail "no checkpoint of the stop step $n"
"$BIN" train "${COMMON[@]}" --set trainer.max_steps=24 --set exp_manager.exp_dir="$TMP/single" \
  --set exp_manager.every_n_train_steps=1000 > "$TMP/single.resume.log" 2>&1 ||
  { cat "$TMP/single.resume.log"; fail "resume after SIGTERM"; }
[ "$(resume_step "$TMP/single.resume.log")" = "$n" ] || fail "resumed at '$(resume_step "$TMP/single.resume.log")', stopped at $n"
losses "$TMP/single/metrics.jsonl" > "$TMP/single.losses"
diff "$TMP/ref.losses" "$TMP/single.losses" || fail "stopped at step $n and resumed: the losses differ from the uninterrupted run"
echo "PASS: SIGTERM after step $n (signalled after $at) -> exit 143, resumed at step $n, same 24 losses"
passed=$((passed + 1))

# 2. SIGTERM while a checkpoint is written every step (asynchronously: one is
#    in flight whenever the signal comes).
run_and_stop saving $((3 + RANDOM % 8)) --set exp_manager.every_n_train_steps=1 \
  --set exp_manager.save_top_k=2
n=$(stop_step "$TMP/saving.log")
[ -d "$TMP/saving/checkpoints/step-$n" ] || { ls -la "$TMP/saving/checkpoints"; fail "no checkpoint of the stop step $n"; }
ls -a "$TMP/saving/checkpoints" | grep -q '^\.step-' && fail "a temporary save was left behind"
"$BIN" train "${COMMON[@]}" --set trainer.max_steps=24 --set exp_manager.exp_dir="$TMP/saving" \
  > "$TMP/saving.resume.log" 2>&1 || { cat "$TMP/saving.resume.log"; fail "resume (saving)"; }
[ "$(resume_step "$TMP/saving.resume.log")" = "$n" ] || fail "saving: resumed at '$(resume_step "$TMP/saving.resume.log")', stopped at $n"
losses "$TMP/saving/metrics.jsonl" > "$TMP/saving.losses"
diff "$TMP/ref.losses" "$TMP/saving.losses" || fail "saving: losses differ from the uninterrupted run"
echo "PASS: SIGTERM during per-step saves: stopped and resumed at step $n, same losses"
passed=$((passed + 1))

# 3. A grace budget too small for the save: no save, exit 143, the next start
#    resumes from the newest earlier checkpoint (here step 2).
HYPERTRAIN_TERMINATION_GRACE_S=0 run_and_stop nobudget 4 \
  --set exp_manager.every_n_train_steps=2
n=$(stop_step "$TMP/nobudget.log")
grep -q "NOT saving it: the save (estimated" "$TMP/nobudget.log" || { cat "$TMP/nobudget.log"; fail "no budget line"; }
[ ! -d "$TMP/nobudget/checkpoints/step-$n" ] || [ $((n % 2)) -eq 0 ] || fail "saved step $n without a budget"
echo "PASS: grace budget 0 -> stop after step $n without its save"
passed=$((passed + 1))

# 4. A second signal exits at once (slower steps, so the first stop is still
#    running when the second signal comes).
"$BIN" train --config "$CONFIG" --set model.data.train_dir="$TMP/data" --set trainer.log_every_n_steps=1 \
  --set trainer.max_steps=1000 --set model.max_context_width=256 --set model.train_batch_size=16 \
  --set exp_manager.exp_dir="$TMP/twice" > "$TMP/twice.log" 2>&1 &
pid=$!
wait_for_step "$TMP/twice.log" 1
kill -TERM $pid
sleep 0.2
start=$(date +%s.%N)
kill -TERM $pid 2>/dev/null || true
rc=0
wait $pid || rc=$?
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
[ $rc -eq 143 ] || { cat "$TMP/twice.log"; fail "second SIGTERM: exit $rc, want 143"; }
grep -q "second stop signal" "$TMP/twice.log" || { cat "$TMP/twice.log"; fail "the second signal was not taken (first stop finished within 0.2 s?)"; }
awk -v t="$took" 'BEGIN { exit !(t < 2) }' || fail "second SIGTERM took ${took}s to exit"
echo "PASS: a second SIGTERM exits at once (${took}s, exit 143)"
passed=$((passed + 1))

# 5. `launch`, 2 nodes x 2 ranks (Gloo on 127.0.0.1): SIGTERM to node 1's
#    launcher only (as when Kubernetes deletes that pod). All four ranks stop
#    after the same step and save it; both launchers exit 143; the next start
#    resumes at exactly that step.
port() { echo $((20000 + (RANDOM % 20000))); }
start_nodes() {  # $1 = name, rest = extra args of train
  local name="$1"; shift
  local p; p=$(port)
  for node in 0 1; do
    env MASTER_ADDR=127.0.0.1 MASTER_PORT=$p NNODES=2 NODE_RANK=$node HYPERTRAIN_JOB_NAME=term \
      HT_GLOO_HOSTNAME=127.0.0.1 HT_RENDEZVOUS_TIMEOUT_S=60 \
      "$BIN" launch --nproc-per-node 2 --grace-period-s 5 -- train "${COMMON[@]}" \
      --set exp_manager.exp_dir="$TMP/$name" --set trainer.max_steps=24 \
      --set exp_manager.every_n_train_steps=1000 "$@" > "$TMP/$name.node$node.log" 2>&1 &
    eval "LAUNCHER$node=$!"
  done
}
start_nodes dist
at=$((3 + RANDOM % 8))
wait_for_step "$TMP/dist.node0.log" "$at"
kill -TERM "$LAUNCHER1"
rc0=0; rc1=0
wait "$LAUNCHER1" || rc1=$?
wait "$LAUNCHER0" || rc0=$?
[ $rc0 -eq 143 ] && [ $rc1 -eq 143 ] || { cat "$TMP/dist.node0.log" "$TMP/dist.node1.log"; fail "launchers exited $rc0 / $rc1, want 143 / 143"; }
n=$(stop_step "$TMP/dist.node0.log")
[ -n "$n" ] || { cat "$TMP/dist.node0.log"; fail "2x2: no stop line"; }
[ -d "$TMP/dist/checkpoints/step-$n" ] || fail "2x2: no checkpoint of the stop step $n"
start_nodes dist
rc0=0; rc1=0
wait "$LAUNCHER0" || rc0=$?
wait "$LAUNCHER1" || rc1=$?
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || { cat "$TMP/dist.node0.log" "$TMP/dist.node1.log"; fail "2x2 resume exited $rc0 / $rc1"; }
[ "$(resume_step "$TMP/dist.node0.log")" = "$n" ] || fail "2x2: resumed at '$(resume_step "$TMP/dist.node0.log")', stopped at $n"
python3 - "$TMP/dist/metrics.jsonl" "$n" <<'PY' || fail "2x2 metrics"
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1])]
n = int(sys.argv[2])
# Every step 1..24 once, except that none is repeated or skipped at the stop.
assert sorted(set(steps)) == list(range(1, 25)), steps
assert len(steps) == 24, f"steps logged twice (lost and redone): {steps}"
PY
echo "PASS: 2x2 under launch: SIGTERM to node 1 -> all ranks stopped after step $n (exit 143 / 143), resumed at $n"
passed=$((passed + 1))

# 6. A plain `hypertrain train` with OpenBLAS's thread pool (issue 40: its
#    threads start before main and do not block SIGTERM; the signal landed on
#    one of them and killed the process at once, no save): periodic saves
#    every 5 steps, SIGTERM at a step that is not one of them; exit 143, the
#    stop step saved, the next start resumes there.
at=$((6 + RANDOM % 3))
OPENBLAS_NUM_THREADS=4 run_and_stop pool "$at" --set exp_manager.every_n_train_steps=5
n=$(stop_step "$TMP/pool.log")
[ -n "$n" ] || { cat "$TMP/pool.log"; fail "pool: no stop line (killed by the signal?)"; }
[ -d "$TMP/pool/checkpoints/step-$n" ] || fail "pool: no checkpoint of the stop step $n"
OPENBLAS_NUM_THREADS=4 "$BIN" train "${COMMON[@]}" --set trainer.max_steps=24 --set exp_manager.exp_dir="$TMP/pool" \
  --set exp_manager.every_n_train_steps=5 > "$TMP/pool.resume.log" 2>&1 || { cat "$TMP/pool.resume.log"; fail "pool resume"; }
[ "$(resume_step "$TMP/pool.resume.log")" = "$n" ] || fail "pool: resumed at '$(resume_step "$TMP/pool.resume.log")', stopped at $n"
echo "PASS: plain train with OpenBLAS threads: SIGTERM after step $n (every 5 saved) -> exit 143, resumed at $n"
passed=$((passed + 1))

# 7. SIGTERM while the ranks wait in rendezvous for a node that never comes (a
#    peer killed during start-up): nothing to finish or save, so the ranks exit
#    143 at once instead of holding the pod until the rendezvous deadline (60 s
#    here) or the launcher's SIGKILL (30 s here).
p=$(port)
env MASTER_ADDR=127.0.0.1 MASTER_PORT=$p NNODES=2 NODE_RANK=0 HYPERTRAIN_JOB_NAME=early HT_GLOO_HOSTNAME=127.0.0.1   HT_RENDEZVOUS_TIMEOUT_S=60 HYPERTRAIN_TERMINATION_GRACE_S=30   "$BIN" launch --nproc-per-node 2 --grace-period-s 30 -- train "${COMMON[@]}"   --set exp_manager.exp_dir="$TMP/early" --set trainer.max_steps=24 > "$TMP/early.log" 2>&1 &
launcher=$!
# Both ranks have their stop handler (SIGTERM in SigCgt), so they are past
# start-up's first line and can only be waiting for node 1.
handled() { local c; c=$(awk '/^SigCgt/ {print $2}' "/proc/$1/status" 2> /dev/null) && [ -n "$c" ] && (( 0x$c & (1 << 14) )); }
for _ in $(seq 1 400); do
  ranks=($(pgrep -P "$launcher" || true))
  [ "${#ranks[@]}" = 2 ] && handled "${ranks[0]}" && handled "${ranks[1]}" && break
  sleep 0.05
done
[ "${#ranks[@]}" = 2 ] && handled "${ranks[0]}" && handled "${ranks[1]}" || { cat "$TMP/early.log"; fail "early: ranks never installed their stop handler"; }
sleep 1
start=$(date +%s.%N)
kill -TERM "$launcher"
rc=0
wait "$launcher" || rc=$?
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
[ $rc -eq 143 ] || { cat "$TMP/early.log"; fail "SIGTERM in rendezvous: launcher exit $rc, want 143"; }
grep -q "before training started: no step to finish" "$TMP/early.log" || { cat "$TMP/early.log"; fail "SIGTERM in rendezvous: no early-exit line"; }
awk -v t="$took" 'BEGIN { exit !(t < 10) }' || { cat "$TMP/early.log"; fail "SIGTERM in rendezvous took ${took}s to exit"; }
[ ! -d "$TMP/early/checkpoints" ] || [ -z "$(ls -A "$TMP/early/checkpoints")" ] || fail "early: a checkpoint was written"
echo "PASS: SIGTERM while waiting in rendezvous -> exit 143 in ${took}s (not the 60 s deadline)"
passed=$((passed + 1))

echo "$passed passed, 0 failed"
