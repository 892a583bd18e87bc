#!/usr/bin/env bash
# One run per directory and checks at start (issue 40, items 2 and 6), through
# the real binary:
#  1. a second trainer on a busy exp_dir exits 2 at once naming the holder
#     (host, pid); the first finishes with every step logged once; a holder
#     killed with -9 does not block the next start (the kernel drops its lock);
#     `launch` 1 x 2 (ranks sharing exp_dir) runs, and a plain trainer on its
#     exp_dir meanwhile is refused naming rank 0;
#  2. a second `prepare` into a busy --out exits 2 naming the first, which
#     completes; a re-run removes the temporary directories of killed runs
#     (its own names only, never a live run's or another name);
#  3. unusable paths are config errors (exit 2) before any step: export_hf_dir
#     and trainer.profile.dir under a file, exp_dir ""; a missing val_dir names
#     model.data.val_dir (exit 3) before any step; backend cuda on a node
#     without a GPU exits 2 with the driver version in the termination message.
set -euo pipefail
source runtime/testing/cli_test_lib.sh
cli_test_init exclusive
prepare_text_data "$TMP/data"
host=$(hostname)
passed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }

COMMON=(--config "$CONFIG" --set model.data.train_dir="$TMP/data" --set trainer.log_every_n_steps=1
        --set model.train_batch_size=2 --set model.max_context_width=32 --set model.num_hidden_layers=2
        --set model.activation_checkpointing=none --set exp_manager.every_n_train_steps=5)

wait_for() {  # $1 = file, $2 = grep pattern, $3 = what
  for _ in $(seq 1 1200); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  cat "$1" 2>/dev/null; fail "$3: never seen"
}
unique_steps() {  # $1 = metrics.jsonl, $2 = steps expected (1..n, each once)
  python3 - "$1" "$2" <<'PY' || fail "metrics $1"
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1]) if '"loss"' in l]
assert steps == list(range(1, int(sys.argv[2]) + 1)), steps
PY
}

# --- 1. Trainers.
"$BIN" train "${COMMON[@]}" --set exp_manager.exp_dir="$TMP/exp" --set trainer.max_steps=40 > "$TMP/a.log" 2>&1 &
a=$!
wait_for "$TMP/a.log" "step 1/" "first trainer's step 1"
rc=0; start=$(date +%s)
"$BIN" train "${COMMON[@]}" --set exp_manager.exp_dir="$TMP/exp" --set trainer.max_steps=40 > "$TMP/b.log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { cat "$TMP/b.log"; fail "second trainer on one exp_dir: exit $rc, want 2"; }
[ $(($(date +%s) - start)) -lt 20 ] || fail "the second trainer took over 20 s to be refused"
grep -q "exp_manager.exp_dir $TMP/exp is in use by another process: host $host, pid $a " "$TMP/b.log" ||
  { cat "$TMP/b.log"; fail "the refusal does not name host $host and pid $a"; }
grep -q "step 1/" "$TMP/b.log" && fail "the refused trainer ran a step"
rc=0; wait $a || rc=$?
[ "$rc" -eq 0 ] || { cat "$TMP/a.log"; fail "first trainer: exit $rc"; }
unique_steps "$TMP/exp/metrics.jsonl" 40
[ ! -e "$TMP/exp/.hypertrain.lock" ] || fail "the lock file was left after a clean end"
pass "a second trainer on one exp_dir: exit 2 naming host $host, pid $a; the first ran steps 1..40 once"

"$BIN" train "${COMMON[@]}" --set exp_manager.exp_dir="$TMP/killed" --set trainer.max_steps=400 > "$TMP/k.log" 2>&1 &
k=$!
wait_for "$TMP/k.log" "step 2/" "trainer to kill"
kill -KILL $k; wait $k 2>/dev/null || true
grep -q "pid $k " "$TMP/killed/.hypertrain.lock" || fail "the lock file does not name pid $k"
"$BIN" train "${COMMON[@]}" --set exp_manager.exp_dir="$TMP/killed" --set trainer.max_steps=3 > "$TMP/k2.log" 2>&1 ||
  { cat "$TMP/k2.log"; fail "a start after kill -9 of the holder"; }
pass "kill -9 of the holder leaves a stale lock file that does not block the next start"

port=$((20000 + (RANDOM % 20000)))
env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port NNODES=1 NODE_RANK=0 HT_GLOO_HOSTNAME=127.0.0.1 \
  "$BIN" launch --nproc-per-node 2 -- train "${COMMON[@]}" --set exp_manager.exp_dir="$TMP/dist" \
  --set trainer.max_steps=30 > "$TMP/dist.log" 2>&1 &
l=$!
wait_for "$TMP/dist.log" "step 1/" "launch 1x2 step 1"
rc=0
"$BIN" train "${COMMON[@]}" --set exp_manager.exp_dir="$TMP/dist" --set trainer.max_steps=3 > "$TMP/d2.log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "in use by another process: host $host, pid [0-9]*" "$TMP/d2.log" ||
  { cat "$TMP/d2.log"; fail "plain trainer beside launch 1x2: exit $rc"; }
holder=$(sed -n 's/.*in use by another process: host [^,]*, pid \([0-9]*\) .*/\1/p' "$TMP/d2.log" | head -1)
[ "$(ps -o ppid= -p "$holder" 2>/dev/null | tr -d ' ')" = "$l" ] || fail "the holder $holder is not a rank of launcher $l"
rc=0; wait $l || rc=$?
[ "$rc" -eq 0 ] || { cat "$TMP/dist.log"; fail "launch 1x2 under the lock: exit $rc"; }
unique_steps "$TMP/dist/metrics.jsonl" 30
pass "launch 1x2 shares exp_dir (one lock, held by rank $holder); a plain trainer beside it exits 2"

# --- 2. prepare. A big input (bytes tokenizer, one worker) keeps the first
# run busy; it is stopped (SIGSTOP) once it holds the lock.
python3 -c '
import sys
line = "the quick brown fox jumps over the lazy dog, again and again and again\n" * 1000
with open(sys.argv[1], "w") as f:
    for _ in range(500): f.write(line)' "$TMP/big.txt"
"$BIN" prepare --out "$TMP/out" --workers 1 "$TMP/big.txt" 2> "$TMP/p1.log" &
p1=$!
for _ in $(seq 1 2000); do [ -s "$TMP/.out.lock" ] && break; sleep 0.005; done
kill -STOP $p1 2>/dev/null || true
[ -s "$TMP/.out.lock" ] || { kill -CONT $p1; wait $p1; fail "the first prepare never held the lock"; }
rc=0
"$BIN" prepare --out "$TMP/out" "$TMP/gen.txt" 2> "$TMP/p2.log" || rc=$?
kill -CONT $p1
[ "$rc" -eq 2 ] || { cat "$TMP/p2.log"; fail "second prepare into one --out: exit $rc, want 2"; }
grep -q "prepare --out $TMP/out is in use by another process: host $host, pid $p1 " "$TMP/p2.log" ||
  { cat "$TMP/p2.log"; fail "the prepare refusal does not name pid $p1"; }
rc=0; wait $p1 || rc=$?
[ "$rc" -eq 0 ] || { cat "$TMP/p1.log"; fail "first prepare: exit $rc"; }
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["tokens"] > 30000000' "$TMP/out/manifest.json" ||
  fail "the first prepare's output was replaced"
pass "a second prepare into one --out: exit 2 naming pid $p1; the first completed"

# Leftovers: a killed run's real temporary directory, and decoys.
"$BIN" prepare --out "$TMP/out2" --workers 1 "$TMP/big.txt" 2> "$TMP/p3.log" &
p3=$!
for _ in $(seq 1 2000); do [ -d "$TMP/.out2.tmp-$p3" ] && break; sleep 0.005; done
kill -KILL $p3; wait $p3 2>/dev/null || true
[ -d "$TMP/.out2.tmp-$p3" ] || fail "no temporary directory of the killed prepare"
sleep 300 & live=$!
mkdir -p "$TMP/.out2.tmp-$live" "$TMP/.out2.tmp-x1" "$TMP/.other.tmp-1"
"$BIN" prepare --out "$TMP/out2" "$TMP/gen.txt" 2> "$TMP/p4.log" || { cat "$TMP/p4.log"; fail "prepare after a killed one"; }
kill $live; wait $live 2>/dev/null || true
[ ! -e "$TMP/.out2.tmp-$p3" ] || fail "the killed run's temporary directory is still there"
grep -q "removing $TMP/.out2.tmp-$p3, left by a run that was killed" "$TMP/p4.log" || { cat "$TMP/p4.log"; fail "removal not logged"; }
[ -d "$TMP/.out2.tmp-$live" ] && [ -d "$TMP/.out2.tmp-x1" ] && [ -d "$TMP/.other.tmp-1" ] ||
  fail "a directory that is not a dead run's leftover was removed"
[ -f "$TMP/out2/manifest.json" ] || fail "no output after the re-run"
pass "prepare removes a killed run's .out2.tmp-$p3, keeps a live pid's, other names and other outputs'"

# --- 3. Checked at start.
expect_start_error() {  # $1 = want rc, $2 = pattern, rest = train args
  local want="$1" pattern="$2"; shift 2
  rc=0
  HYPERTRAIN_TERMINATION_LOG="$TMP/term.log" "$BIN" train "${COMMON[@]}" --set trainer.max_steps=2 "$@" \
    > "$TMP/s.log" 2>&1 || rc=$?
  [ "$rc" -eq "$want" ] || { cat "$TMP/s.log"; fail "$*: exit $rc, want $want"; }
  grep -q -- "$pattern" "$TMP/s.log" || { cat "$TMP/s.log"; fail "$*: no '$pattern'"; }
  grep -q "step 1/" "$TMP/s.log" && fail "$*: a step ran before the error"
  return 0
}
touch "$TMP/file"
expect_start_error 2 "exp_manager.checkpoint.export_hf_dir: $TMP/file/hf: " \
  --set exp_manager.exp_dir="$TMP/s1" --set exp_manager.checkpoint.export_hf_dir="$TMP/file/hf"
grep -q "exit 2: .*export_hf_dir" "$TMP/term.log" || fail "termination message: $(cat "$TMP/term.log")"
expect_start_error 2 "trainer.profile.dir: $TMP/file/traces: " --set exp_manager.exp_dir="$TMP/s2" \
  --set trainer.profile.num_steps=1 --set trainer.profile.dir="$TMP/file/traces"
expect_start_error 2 "exp_manager.exp_dir: empty" --set "exp_manager.exp_dir=''"
expect_start_error 3 "model.data.val_dir '$TMP/no-val' is not a directory" --set exp_manager.exp_dir="$TMP/s3" \
  --set model.data.val_dir="$TMP/no-val" --set trainer.limit_val_batches=2 --set trainer.val_check_interval=1
grep -q "exit 3: model.data.val_dir" "$TMP/term.log" || fail "val_dir termination message: $(cat "$TMP/term.log")"
[ ! -e "$TMP/s1" ] && [ ! -e "$TMP/s3" ] || fail "a run refused at start left its exp_dir behind"
pass "export_hf_dir, profile.dir under a file and exp_dir '' exit 2; a missing val_dir exits 3 naming it; before any step"

if [ -e /dev/nvidiactl ]; then
  pass "backend cuda without a GPU: not checkable on a node with an NVIDIA driver"
else
  expect_start_error 2 "trainer.backend: cuda: " --set exp_manager.exp_dir="$TMP/s4" --set trainer.backend=cuda
  if "$BIN" --help | grep -q "CPU and CUDA backends"; then
    grep -q "exit 2: trainer.backend: cuda: no usable CUDA device .*NVIDIA driver not loaded.*driver >= 580" "$TMP/term.log" ||
      fail "the termination message does not give the driver: $(cat "$TMP/term.log")"
  else
    grep -q "exit 2: trainer.backend: cuda: .*not built in" "$TMP/term.log" || fail "termination message: $(cat "$TMP/term.log")"
  fi
  pass "backend cuda on a node without a GPU: exit 2, the driver in the termination message"
fi

echo "$passed passed, 0 failed"
