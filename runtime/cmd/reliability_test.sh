#!/usr/bin/env bash
# Faults a user meets, through the real binary (issue 18): checkpoints that
# exist but none verifies (stop with exit 3, nothing touched), a corrupt
# newest one (fall back, move it aside, never overwrite it), an edited
# manifest (its checksum), non-finite config values and non-finite state
# (never committed), unusable directories (exit 2, not 200), a failed final
# save (not exit 0), the messages of a few mistakes, and no empty
# checkpoints/ left after a data error.
set -euo pipefail
BIN="${HYPERTRAIN_BIN:-$PWD/runtime/cmd/hypertrain}"
CONFIG="$PWD/examples/tiny-cpu.yaml"
TMP="$(mktemp -d "${TEST_TMPDIR:-/tmp}/reliability.XXXXXX")"
fail() { echo "FAIL: $*" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
passed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }

inputs=(/usr/share/common-licenses/*)
if [ ! -e "${inputs[0]}" ]; then
  for i in $(seq 1 3000); do echo "line $i: the quick brown fox jumps over the lazy dog"; done > "$TMP/gen.txt"
  inputs=("$TMP/gen.txt")
fi
"$BIN" prepare --out "$TMP/data" --tokens-per-shard 100000 "${inputs[@]}" 2> "$TMP/prepare.log"

COMMON=(--config "$CONFIG" --set model.data.train_dir="$TMP/data" --set trainer.log_every_n_steps=1
        --set model.train_batch_size=2 --set model.max_context_width=32 --set model.num_hidden_layers=2
        --set model.activation_checkpointing=none --set exp_manager.every_n_train_steps=2
        --set exp_manager.save_top_k=100)
train() {  # $1 = exp dir name, $2 = log name, rest = extra args; sets rc
  local exp="$1" log="$2"; shift 2
  rc=0
  "$BIN" train "${COMMON[@]}" --set exp_manager.exp_dir="$TMP/$exp" "$@" > "$TMP/$log.log" 2>&1 || rc=$?
}
expect_rc() {  # $1 = want, $2 = log name, $3 = what
  [ "$rc" -eq "$1" ] || { cat "$TMP/$2.log"; fail "$3: exit $rc, want $1"; }
}
snapshot() { (cd "$1" && find . -type f -exec md5sum {} + | sort); }

# --- 1. A node that never joins: the start-up deadline, not a hang; exit 200
# naming the missing node ranks / ranks and the store.
port=$((20000 + (RANDOM % 20000)))
rdv() {  # $1 = node rank, $2 = log name; sets rc and took
  local start; start=$(date +%s.%N)
  rc=0
  env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port NNODES=2 NODE_RANK=$1 HT_GLOO_HOSTNAME=127.0.0.1     HT_RENDEZVOUS_TIMEOUT_S=4 timeout 120 "$BIN" launch --nproc-per-node 2 -- train "${COMMON[@]}"     --set trainer.max_steps=2 --set exp_manager.exp_dir="$TMP/rdv" > "$TMP/$2.log" 2>&1 || rc=$?
  took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}
rdv 0 rdv0
expect_rc 200 rdv0 "node 1 never started"
awk -v t="$took" 'BEGIN { exit !(t < 30) }' || fail "node 0 gave up after ${took}s with a 4 s deadline"
grep -q "2 of 4 ranks did not join the rendezvous at 127.0.0.1:$port .*node ranks \[1\] (ranks \[2, 3\])" "$TMP/rdv0.log" ||
  { cat "$TMP/rdv0.log"; fail "the message does not name node 1 / ranks 2, 3 and the store"; }
rdv 1 rdv1
expect_rc 200 rdv1 "node 0 never started"
grep -q "cannot join the rendezvous .*127.0.0.1:$port.*node rank 0, which serves the store, never started" "$TMP/rdv1.log" ||
  { cat "$TMP/rdv1.log"; fail "node 1's message does not name node 0 and the store"; }
pass "a missing node: exit 200 after ${took}s naming node ranks [1] (ranks [2, 3]) / node 0 and the store"

# --- 3. Every checkpoint unreadable: exit 3 naming each; nothing changes.
train corrupt base --set trainer.max_steps=4
expect_rc 0 base "first run"
for s in 2 4; do
  f=$(ls "$TMP/corrupt/checkpoints/step-$s"/shard-*.bin | head -1)
  printf 'garbage' | dd of="$f" bs=1 seek=4096 conv=notrunc 2>/dev/null
done
before=$(snapshot "$TMP/corrupt/checkpoints")
train corrupt allbad --set trainer.max_steps=6
expect_rc 3 allbad "all checkpoints corrupt"
grep -q "2 checkpoint(s) under .* and none is usable" "$TMP/allbad.log" || { cat "$TMP/allbad.log"; fail "no list of unusable checkpoints"; }
grep -q "step-4: .*crc32c" "$TMP/allbad.log" && grep -q "step-2: .*crc32c" "$TMP/allbad.log" || fail "each checkpoint and why"
grep -q "start_fresh" "$TMP/allbad.log" || fail "the message names start_fresh"
[ "$before" = "$(snapshot "$TMP/corrupt/checkpoints")" ] || fail "checkpoints changed after a data-loss stop"
[ "$(ls "$TMP/corrupt/checkpoints")" = "$(printf 'step-2\nstep-4')" ] || fail "checkpoint dir listing changed: $(ls "$TMP/corrupt/checkpoints")"
pass "every checkpoint corrupt -> exit 3 listing each, nothing touched"

# start_fresh: trains from initialisation; the corrupt step-2 and step-4 it
# would take the names of are moved aside, not deleted.
train corrupt fresh --set trainer.max_steps=4 --set exp_manager.start_fresh=true
expect_rc 0 fresh "start_fresh over corrupt checkpoints"
ls -d "$TMP/corrupt/checkpoints"/step-2.corrupt-* "$TMP/corrupt/checkpoints"/step-4.corrupt-* > /dev/null ||
  { ls -la "$TMP/corrupt/checkpoints"; fail "corrupt checkpoints were not moved aside"; }
pass "start_fresh: new step-2/step-4 written, the corrupt ones kept as step-N.corrupt-*"

# --- 3b. Newest corrupt, an older one good: resume from the older one, the
# corrupt one is moved aside before this run's save of that step.
train fallback base2 --set trainer.max_steps=4
expect_rc 0 base2 "first run (fallback)"
f=$(ls "$TMP/fallback/checkpoints/step-4"/shard-*.bin | head -1)
printf 'garbage' | dd of="$f" bs=1 seek=4096 conv=notrunc 2>/dev/null
corrupt_sum=$(md5sum < "$f")
train fallback fb --set trainer.max_steps=6
expect_rc 0 fb "fallback run"
grep -q "resumed at step 2" "$TMP/fb.log" || { cat "$TMP/fb.log"; fail "did not fall back to step 2"; }
aside=$(ls -d "$TMP/fallback/checkpoints"/step-4.corrupt-* | head -1)
[ -n "$aside" ] || fail "step-4 not moved aside"
[ "$(md5sum < "$aside/$(basename "$f")")" = "$corrupt_sum" ] || fail "the corrupt checkpoint was changed"
[ -d "$TMP/fallback/checkpoints/step-4" ] && [ -d "$TMP/fallback/checkpoints/step-6" ] || fail "new saves missing"
pass "corrupt newest -> resume from step 2, step-4 kept aside unchanged, new step-4 and step-6 saved"

# --- 4. An edited manifest (tokens_seen) is corruption: fall back.
train manifest base3 --set trainer.max_steps=4
expect_rc 0 base3 "first run (manifest)"
python3 - "$TMP/manifest/checkpoints/step-4/manifest.json" <<'PY'
import json, sys
p = sys.argv[1]; j = json.load(open(p))
j["tokens_seen"] += 1000
json.dump(j, open(p, "w"), indent=1)
PY
train manifest edited --set trainer.max_steps=6
expect_rc 0 edited "edited manifest"
grep -q "manifest.json: content crc32c .* (edited or corrupt)" "$TMP/edited.log" || { cat "$TMP/edited.log"; fail "no checksum message"; }
grep -q "resumed at step 2" "$TMP/edited.log" || fail "an edited manifest was loaded"
pass "edited manifest -> checksum mismatch, fallback to step 2"

# --- 5. Non-finite values: a config error; non-finite state never committed.
for v in .inf .nan -.inf; do
  train nf nf --set trainer.max_steps=2 --set model.optim.lr=$v
  expect_rc 2 nf "lr=$v"
  grep -q "model.optim.lr: .* is not a finite number" "$TMP/nf.log" || { cat "$TMP/nf.log"; fail "lr=$v message"; }
done
[ ! -e "$TMP/nf" ] || fail "a config error left $TMP/nf behind"
train nan base4 --set trainer.max_steps=2
expect_rc 0 base4 "first run (nan)"
good=$(snapshot "$TMP/nan/checkpoints")
# 1e39 is a finite double but not a float: the update overflows to inf.
for verify in true false; do
  train nan diverged --set trainer.max_steps=4 --set exp_manager.every_n_train_steps=1 --set model.optim.lr=1e39 \
    --set exp_manager.checkpoint.verify_checksums=$verify
  [ "$rc" -ne 0 ] || { cat "$TMP/diverged.log"; fail "a diverged run exited 0"; }
  grep -q "hold a non-finite value" "$TMP/diverged.log" || { cat "$TMP/diverged.log"; fail "no non-finite message"; }
  [ "$(ls "$TMP/nan/checkpoints")" = "step-2" ] || fail "a non-finite checkpoint was committed: $(ls "$TMP/nan/checkpoints")"
  [ "$good" = "$(snapshot "$TMP/nan/checkpoints")" ] || fail "the good checkpoint changed"
done
pass "inf/nan config values exit 2; a diverged state is never committed (verify_checksums true and false)"

# --- 6. Directories that cannot work are config errors (2), not retryable (200).
touch "$TMP/regular-file"
train "regular-file/exp" enotdir --set trainer.max_steps=1
expect_rc 2 enotdir "exp_dir under a regular file"
grep -qi "not a directory" "$TMP/enotdir.log" || fail "ENOTDIR message"
if [ "$(id -u)" -ne 0 ]; then
  mkdir -p "$TMP/ro" && chmod 555 "$TMP/ro"
  train "ro/exp" eacces --set trainer.max_steps=1
  expect_rc 2 eacces "exp_dir in a read-only directory"
  mkdir -p "$TMP/ro2/exp/checkpoints" && chmod 555 "$TMP/ro2/exp/checkpoints"
  train "ro2/exp" eacces2 --set trainer.max_steps=1
  expect_rc 2 eacces2 "read-only checkpoints/"
  chmod 755 "$TMP/ro" "$TMP/ro2/exp/checkpoints"
  pass "ENOTDIR and EACCES exp_dir / checkpoint dir -> exit 2 before training"
else
  pass "ENOTDIR exp_dir -> exit 2 (EACCES not checkable as root)"
fi
# A failed FINAL save is an error even with failure_policy: continue.
rc=0
HYPERTRAIN_CKPT_FAIL_AFTER_BYTES=0 "$BIN" train "${COMMON[@]}" --set exp_manager.exp_dir="$TMP/final" \
  --set trainer.max_steps=3 --set exp_manager.every_n_train_steps=0 \
  --set exp_manager.checkpoint.failure_policy=continue > "$TMP/final.log" 2>&1 || rc=$?
[ "$rc" -eq 200 ] || { cat "$TMP/final.log"; fail "failed final save with failure_policy=continue: exit $rc, want 200"; }
grep -q "the final checkpoint (step 3) was not written" "$TMP/final.log" || fail "final save message"
pass "failed final save with failure_policy=continue -> exit 200"
# The same when the final step is also a periodic one (max_steps a multiple of
# every_n_train_steps): its periodic save is the final save (issue 40).
for async in true false; do
  rc=0
  HYPERTRAIN_CKPT_FAIL_AFTER_BYTES=0 "$BIN" train "${COMMON[@]}" --set exp_manager.exp_dir="$TMP/final-periodic-$async" \
    --set trainer.max_steps=4 --set exp_manager.every_n_train_steps=2 --set exp_manager.async_save=$async \
    --set exp_manager.checkpoint.failure_policy=continue > "$TMP/final-periodic.log" 2>&1 || rc=$?
  [ "$rc" -eq 200 ] || { cat "$TMP/final-periodic.log"; fail "failed periodic final save (async_save=$async): exit $rc, want 200"; }
  grep -q "the final checkpoint (step 4) was not written" "$TMP/final-periodic.log" || { cat "$TMP/final-periodic.log"; fail "final periodic save message"; }
  grep -q "done: " "$TMP/final-periodic.log" && fail "a run whose final save failed said done"
done
pass "failed final save that is also a periodic one (every_n_train_steps=2, max_steps=4) -> exit 200"

# --- 7. Messages.
rc=0; "$BIN" train --config "$TMP" > "$TMP/dir.log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "is a directory, not a YAML file" "$TMP/dir.log" || { cat "$TMP/dir.log"; fail "--config <dir>"; }
train typo typo --set trainer.max_steps=1 --set model.optim.lrr=1
expect_rc 2 typo "unknown --set key"
grep -q -- "--set: unknown key model.optim.lrr (did you mean model.optim.lr?)" "$TMP/typo.log" || { cat "$TMP/typo.log"; fail "unknown --set key message"; }
grep -q "tiny-cpu.yaml: unknown key" "$TMP/typo.log" && fail "the --set key was attributed to the YAML file"
train hf hf --set trainer.max_steps=1 --set exp_manager.hf_init_from="$TMP/no-such-hf"
[ "$rc" -ne 0 ] && grep -q "exp_manager.hf_init_from: $TMP/no-such-hf is not a Hugging Face model directory" "$TMP/hf.log" ||
  { cat "$TMP/hf.log"; fail "hf_init_from message"; }
rc=0; "$BIN" launch --help > "$TMP/lh.out" 2> "$TMP/lh.err" || rc=$?
[ "$rc" -eq 0 ] && [ "$(grep -c "Usage: hypertrain launch" "$TMP/lh.out" "$TMP/lh.err" | awk -F: '{s+=$2} END {print s}')" -eq 1 ] ||
  { cat "$TMP/lh.out" "$TMP/lh.err"; fail "launch --help: exit $rc or usage not printed once"; }
train done base3 --set trainer.max_steps=2
train manifest nothing --set trainer.max_steps=2 --set exp_manager.resume_from_checkpoint="$TMP/manifest/checkpoints/step-2"
grep -q "final loss 0.0000" "$TMP/nothing.log" && fail "a run with nothing to do printed a final loss"
grep -q "nothing to do" "$TMP/nothing.log" || { cat "$TMP/nothing.log"; fail "nothing-to-do message"; }
pass "messages: --config <dir>, unknown --set key attributed to --set, hf_init_from, launch --help, nothing to do"

# --- 8. No empty checkpoints/ (or exp_dir) left behind by a data error.
train leftover leftover --set trainer.max_steps=2 --set model.data.train_dir="$TMP/no-such-data"
expect_rc 3 leftover "missing data"
[ ! -e "$TMP/leftover" ] || { find "$TMP/leftover"; fail "a data error left $TMP/leftover behind"; }
pass "a data error leaves no empty exp_dir/checkpoints"

echo "$passed passed, 0 failed"
