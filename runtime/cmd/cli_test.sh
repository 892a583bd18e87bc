#!/usr/bin/env bash
# Runs the real `hypertrain` binary: prepare text -> train tiny on CPU for a few
# steps -> loss falls, metrics files exist; plus exit codes for bad input.
set -euo pipefail

BIN="$PWD/runtime/cmd/hypertrain"
EXAMPLE="$PWD/examples/tiny-cpu.yaml"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*" >&2; exit 1; }

# Exit codes of the dispatcher.
set +e
"$BIN" >/dev/null 2>&1; [ $? -eq 2 ] || fail "no command should exit 2"
"$BIN" frobnicate >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown command should exit 2"
env -u HYPERTRAIN_CONFIG "$BIN" train >/dev/null 2>&1; [ $? -eq 2 ] || fail "train without --config should exit 2"
set -e
"$BIN" --help | grep -q "prepare" || fail "usage lists prepare"
"$BIN" --version | grep -Eq '^hypertrain [^ ]+$' || fail "--version: $("$BIN" --version 2>&1)"
"$BIN" --help | grep -q -- "--version" || fail "--help lists --version"
"$BIN" help | grep -q "launch" || fail "help lists the commands"
"$BIN" launch --help | grep -q -- "--metrics-port" || fail "launch --help lists --metrics-port"
set +e
"$BIN" launch --metrics-port 70000 -- train > "$TMP/badport.log" 2>&1
[ $? -eq 2 ] || fail "--metrics-port 70000 should exit 2"
grep -q "metrics-port" "$TMP/badport.log" || fail "bad --metrics-port message: $(cat "$TMP/badport.log")"
HYPERTRAIN_METRICS_PORT=abc "$BIN" launch -- /bin/true > "$TMP/badenv.log" 2>&1
[ $? -eq 2 ] || fail "HYPERTRAIN_METRICS_PORT=abc should exit 2"
grep -q "HYPERTRAIN_METRICS_PORT='abc' is not a port number" "$TMP/badenv.log" || fail "bad env port message"
set -e

# Text that exists on every Debian machine (fallback: generated text).
inputs=(/usr/share/common-licenses/*)
if [ ! -e "${inputs[0]}" ]; then
  for i in $(seq 1 300); do echo "line $i: the quick brown fox jumps over the lazy dog"; done > "$TMP/gen.txt"
  inputs=("$TMP/gen.txt")
fi
"$BIN" prepare --out "$TMP/data" --tokens-per-shard 100000 "${inputs[@]}" 2> "$TMP/prepare.log"
ls "$TMP/data"/shard_00000.bin >/dev/null || fail "prepare wrote no shard"

# Log flags: global or per command; JSON is one object per line; a bad value exits 2.
set +e
"$BIN" --log-format=json train --config "$EXAMPLE" --set model.activation_checkpointing=partial 2> "$TMP/bad.json"
[ $? -eq 2 ] || fail "bad config should exit 2 (JSON logs)"
python3 -c 'import json,sys; l=json.loads(open(sys.argv[1]).readline()); assert l["level"]=="error" and "partial" in l["msg"], l' \
  "$TMP/bad.json" || { cat "$TMP/bad.json"; fail "JSON log line"; }
"$BIN" train --log-level=critical --config "$EXAMPLE" --set model.activation_checkpointing=partial 2> "$TMP/bad.quiet"
[ $? -eq 2 ] || fail "bad config should exit 2 (--log-level=critical)"
[ ! -s "$TMP/bad.quiet" ] || fail "--log-level=critical still logged: $(cat "$TMP/bad.quiet")"
"$BIN" --log-level critical train --config "$EXAMPLE" --set model.activation_checkpointing=partial 2> "$TMP/bad.quiet2"
[ $? -eq 2 ] || fail "bad config should exit 2 (global --log-level critical, space form)"
[ ! -s "$TMP/bad.quiet2" ] || fail "global --log-level critical still logged: $(cat "$TMP/bad.quiet2")"
"$BIN" --log-levle=debug train > "$TMP/typo.log" 2>&1
[ $? -eq 2 ] || fail "a misspelt global flag should exit 2"
grep -q -- "--log-levle" "$TMP/typo.log" || fail "the error names the misspelt flag: $(cat "$TMP/typo.log")"
"$BIN" --log-format=yaml prepare --out "$TMP/x" "${inputs[0]}" > "$TMP/badfmt.log" 2>&1
[ $? -eq 2 ] || fail "a bad --log-format should exit 2"
grep -q "log format 'yaml' is not text or json" "$TMP/badfmt.log" || fail "bad --log-format message"
set -e

# An unknown key (a typo) is a config error with a suggestion...
set +e
"$BIN" train --config "$EXAMPLE" --set model.data.train_dir="$TMP/data" --set model.hiden_size=64 \
  > "$TMP/typo.log" 2>&1
[ $? -eq 2 ] || { cat "$TMP/typo.log"; fail "an unknown key should exit 2"; }
grep -q "unknown key model.hiden_size (did you mean model.hidden_size?)" "$TMP/typo.log" || fail "typo message: $(cat "$TMP/typo.log")"
set -e
# ... and with hypertrain.unknown_keys: warn (here from its HT_* override), a warning.
# Train: the quickstart config, shortened.
HT_UNKNOWN_KEYS=warn "$BIN" train --config "$EXAMPLE" \
  --set model.data.train_dir="$TMP/data" --set exp_manager.exp_dir="$TMP/exp" \
  --set trainer.max_steps=30 --set trainer.log_every_n_steps=5 --set model.bogus_key=1 \
  > "$TMP/train.log" 2>&1 || { cat "$TMP/train.log"; fail "train exited $?"; }
cat "$TMP/train.log"
grep -q "unknown keys (ignored: hypertrain.unknown_keys is warn): model.bogus_key" "$TMP/train.log" || fail "no unknown-key warning"
grep -q "HT_UNKNOWN_KEYS=warn sets hypertrain.unknown_keys" "$TMP/train.log" || fail "the HT_* override is not logged"
grep -q "step 30/30 | loss" "$TMP/train.log" || fail "no step line"
grep -q "Megatron formula" "$TMP/train.log" || fail "no FLOPs line"
[ -s "$TMP/exp/metrics.jsonl" ] || fail "metrics.jsonl missing"
[ "$(wc -l < "$TMP/exp/metrics.jsonl")" -eq 6 ] || fail "expected 6 metric lines"
ls "$TMP/exp/tensorboard"/events.out.tfevents.* >/dev/null || fail "no tensorboard file"
first=$(head -1 "$TMP/exp/metrics.jsonl" | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')
last=$(tail -1 "$TMP/exp/metrics.jsonl" | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f - 1.0) }' || fail "loss did not fall: $first -> $last"
echo "loss $first -> $last"

# As in a TrainingJob pod (contract/env.h): the config from HYPERTRAIN_CONFIG,
# checkpoints where HYPERTRAIN_CHECKPOINT_DIR says, not under exp_dir.
HYPERTRAIN_CONFIG="$EXAMPLE" HYPERTRAIN_CHECKPOINT_DIR="$TMP/env-ckpt" "$BIN" train \
  --set model.data.train_dir="$TMP/data" --set exp_manager.exp_dir="$TMP/exp-env" \
  --set trainer.max_steps=4 --set exp_manager.every_n_train_steps=2 > "$TMP/env.log" 2>&1 \
  || { cat "$TMP/env.log"; fail "train from the env exited $?"; }
[ -s "$TMP/env-ckpt/step-4/manifest.json" ] || { cat "$TMP/env.log"; fail "no checkpoint in HYPERTRAIN_CHECKPOINT_DIR"; }
[ ! -e "$TMP/exp-env/checkpoints" ] || fail "checkpoints went to exp_dir despite HYPERTRAIN_CHECKPOINT_DIR"

# `hypertrain launch --metrics-port`: a scrape while the trainer runs shows its
# step metrics and the launcher's ranks; SIGTERM still ends the run cleanly.
mport=$((20000 + RANDOM % 20000))
MASTER_ADDR=127.0.0.1 MASTER_PORT=$((mport + 1)) NNODES=1 NODE_RANK=0 HT_GLOO_HOSTNAME=127.0.0.1 \
  "$BIN" launch --nproc-per-node 1 --metrics-port "$mport" -- train --config "$EXAMPLE" \
  --set model.data.train_dir="$TMP/data" --set exp_manager.exp_dir="$TMP/exp-launch" \
  --set trainer.max_steps=100000 --set trainer.log_every_n_steps=2 > "$TMP/launch.log" 2>&1 &
launcher=$!
scraped=""
for _ in $(seq 1 120); do
  if curl -fsS --max-time 5 "http://127.0.0.1:$mport/metrics" > "$TMP/scrape.txt" 2>/dev/null &&
     grep -Eq '^hypertrain_trainer_step [0-9]*[1-9]' "$TMP/scrape.txt"; then scraped=1; break; fi
  sleep 0.5
done
kill -TERM "$launcher" 2>/dev/null || true
wait "$launcher" || true
[ -n "$scraped" ] || { cat "$TMP/launch.log"; fail "no trainer step metrics on :$mport/metrics"; }
for series in 'hypertrain_launcher_ranks_running 1' '# TYPE hypertrain_trainer_tokens_total counter' \
              'hypertrain_trainer_max_steps 100000' '# TYPE process_cpu_seconds_total counter'; do
  grep -q "^$series" "$TMP/scrape.txt" || { cat "$TMP/scrape.txt"; fail "scrape lacks '$series'"; }
done
grep -Eq '^hypertrain_trainer_loss [0-9]' "$TMP/scrape.txt" || fail "scrape lacks the loss"
grep -q "serving Prometheus metrics on :$mport/metrics" "$TMP/launch.log" || fail "no endpoint log line"
grep -q "NCCL net plugin: " "$TMP/launch.log" || fail "no NCCL net plugin preflight line"
pgrep -f "$TMP/exp-launch" >/dev/null && fail "a rank outlived its launcher"

# Config errors exit 2 and name the key; missing data exits 3.
set +e
"$BIN" train --config "$EXAMPLE" --set model.activation_checkpointing=partial > "$TMP/bad.log" 2>&1
[ $? -eq 2 ] || fail "bad value should exit 2"
grep -q "model.activation_checkpointing: 'partial' is not one of none, selective, full" "$TMP/bad.log" \
  || fail "bad value message"
"$BIN" train --config "$EXAMPLE" --set model.data.train_dir="$TMP/nowhere" \
  --set exp_manager.exp_dir="$TMP/exp2" > "$TMP/nodata.log" 2>&1
[ $? -eq 3 ] || { cat "$TMP/nodata.log"; fail "missing data should exit 3"; }
grep -q "nowhere" "$TMP/nodata.log" || fail "missing data message names the dir"
set -e
echo PASS
