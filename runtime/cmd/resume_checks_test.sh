#!/usr/bin/env bash
# Resuming under another config or on other data, through the real binary
# (issue 40): a resume on another data manifest warns naming both; the
# config warning names the keys that change the trajectory (old -> new), not
# max_steps; a checkpoint manifest whose checksum was removed is refused (the
# checkpoint falls back and is moved aside) unless
# exp_manager.checkpoint.verify_checksums: false.
set -euo pipefail
BIN="${HYPERTRAIN_BIN:-$PWD/runtime/cmd/hypertrain}"
CONFIG="$PWD/examples/tiny-cpu.yaml"
TMP="$(mktemp -d "${TEST_TMPDIR:-/tmp}/resume_checks.XXXXXX")"
fail() { echo "FAIL: $*" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
passed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }

for i in $(seq 1 600); do echo "line $i: the quick brown fox jumps over the lazy dog $((i * 31 % 97))"; done > "$TMP/a.txt"
for i in $(seq 1 600); do echo "other $i: pack my box with five dozen liquor jugs $((i * 17 % 89))"; done > "$TMP/b.txt"
"$BIN" prepare --out "$TMP/data_a" "$TMP/a.txt" 2> /dev/null
"$BIN" prepare --out "$TMP/data_b" "$TMP/b.txt" 2> /dev/null

# lr_decay_iters set: the schedule no longer depends on max_steps.
COMMON=(--config "$CONFIG" --set exp_manager.exp_dir="$TMP/exp" --set model.train_batch_size=2
        --set model.max_context_width=32 --set model.num_hidden_layers=2 --set exp_manager.every_n_train_steps=2
        --set exp_manager.save_top_k=100 --set model.lr_decay_iters=100)
train() {  # $1 = log name, rest = extra args; exits on failure
  local log="$1"; shift
  "$BIN" train "${COMMON[@]}" "$@" > "$TMP/$log.log" 2>&1 || { cat "$TMP/$log.log"; fail "$log: exit $?"; }
}

train first --set model.data.train_dir="$TMP/data_a" --set trainer.max_steps=4

# A longer run on the same data and config: nothing to warn about.
train longer --set model.data.train_dir="$TMP/data_a" --set trainer.max_steps=6
grep -q "resumed at step 4" "$TMP/longer.log" || { cat "$TMP/longer.log"; fail "longer: no resume"; }
if grep -q "changes the training trajectory\|config hash\|on other data" "$TMP/longer.log"; then
  cat "$TMP/longer.log"; fail "a longer run (max_steps only) warned"
fi
pass "max_steps alone (lr_decay_iters set): resumed without a config or data warning"

# Other data and another learning rate: both named.
train other --set model.data.train_dir="$TMP/data_b" --set trainer.max_steps=8 --set model.optim.lr=0.002
grep -q "resumed at step 6" "$TMP/other.log" || { cat "$TMP/other.log"; fail "other: no resume"; }
grep -q "under a config that changes the training trajectory: model.optim.lr 0.003 -> 0.002$" "$TMP/other.log" ||
  { cat "$TMP/other.log"; fail "the config warning does not name exactly model.optim.lr"; }
grep -q "on other data: it was trained on model.data.train_dir $TMP/data_a (manifest.json crc32c [0-9a-f]*, [0-9]* tokens), this run reads model.data.train_dir $TMP/data_b (manifest.json crc32c [0-9a-f]*, [0-9]* tokens)" \
  "$TMP/other.log" || { cat "$TMP/other.log"; fail "the data warning does not name both manifests"; }
pass "other data and lr: one warning naming model.optim.lr 0.003 -> 0.002, one naming both data manifests"

# Without lr_decay_iters, max_steps sets the decay horizon: named as such.
train horizon --set model.data.train_dir="$TMP/data_b" --set trainer.max_steps=10 --set model.optim.lr=0.002 \
  --set model.lr_decay_iters=0
grep -qF "changes the training trajectory: model.lr_decay_iters (0: trainer.max_steps) unset -> 10, model.lr_decay_iters 100 -> unset" \
  "$TMP/horizon.log" || { cat "$TMP/horizon.log"; fail "the decay horizon is not named"; }
pass "lr_decay_iters 0: the warning names the horizon max_steps sets"

# The newest manifest's checksum removed: refused, falls back, moved aside.
python3 - "$TMP/exp/checkpoints/step-10/manifest.json" <<'PY'
import json, sys
p = sys.argv[1]; j = json.load(open(p))
del j["manifest_crc32c"]
j["tokens_seen"] += 1000
json.dump(j, open(p, "w"), indent=1)
PY
COMMON+=(--set model.data.train_dir="$TMP/data_b" --set model.optim.lr=0.002 --set model.lr_decay_iters=0)
train nosum --set trainer.max_steps=12
grep -q "skipping checkpoint $TMP/exp/checkpoints/step-10: .*manifest.json has no manifest_crc32c (removed, or written before it existed): its content cannot be checked; set exp_manager.checkpoint.verify_checksums: false to load it anyway" \
  "$TMP/nosum.log" || { cat "$TMP/nosum.log"; fail "no refusal naming the switch"; }
grep -q "resumed at step 8" "$TMP/nosum.log" || { cat "$TMP/nosum.log"; fail "did not fall back to step 8"; }
aside=$(ls -d "$TMP/exp/checkpoints"/step-10.corrupt-* | head -1)
[ -n "$aside" ] || fail "step-10 not moved aside"
pass "a manifest without its checksum: refused, fell back to step 8, moved aside"

# With the documented switch it loads (warned).
python3 - "$TMP/exp/checkpoints/step-12/manifest.json" <<'PY'
import json, sys
p = sys.argv[1]; j = json.load(open(p))
del j["manifest_crc32c"]
json.dump(j, open(p, "w"), indent=1)
PY
train switch --set trainer.max_steps=14 --set exp_manager.checkpoint.verify_checksums=false
grep -q "resumed at step 12" "$TMP/switch.log" || { cat "$TMP/switch.log"; fail "verify_checksums: false did not load it"; }
grep -q "manifest.json without manifest_crc32c loaded unchecked (exp_manager.checkpoint.verify_checksums: false)" "$TMP/switch.log" ||
  { cat "$TMP/switch.log"; fail "no warning when loading unchecked"; }
pass "verify_checksums: false loads a manifest without its checksum, with a warning"

echo "$passed passed, 0 failed"
