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

# Every command's --help (exit 0) lists its flags with their defaults; the
# binary's lists every command.
help_lists() {  # help_lists "command words" flag...
  local cmd=$1; shift
  "$BIN" $cmd --help > "$TMP/help.out" 2>&1 || { cat "$TMP/help.out"; fail "$cmd --help exited $?"; }
  grep -q "^Usage: hypertrain $cmd " "$TMP/help.out" || { cat "$TMP/help.out"; fail "$cmd --help: no usage line"; }
  for flag in "$@"; do
    grep -q -- "$flag" "$TMP/help.out" || { cat "$TMP/help.out"; fail "$cmd --help does not list '$flag'"; }
  done
}
"$BIN" --help > "$TMP/top-help.out"
for c in train config prepare tokenize detokenize launch bench estimate trace; do
  grep -Eq "^  $c +[A-Z]" "$TMP/top-help.out" || fail "hypertrain --help does not list $c"
done
help_lists train "--config FILE" "--set KEY.PATH=VALUE ..." "--log-level" "--log-format text|json=text"
help_lists config "--config FILE" "--set KEY.PATH=VALUE ..."
help_lists prepare "--out DIR (required)" "--tokens-per-shard N >= 2=16777216" "--bos auto|always|never=auto" \
  "--no-progress " "--sft " "--chat-format llama3|llama2|none=llama3" "INPUT FILE|DIR ... (required)"
help_lists tokenize "--tokenizer DIR (required)" "--no-special" "--plain-special"
help_lists detokenize "--tokenizer DIR (required)" "--skip-special"
help_lists launch "--nproc-per-node,--nproc_per_node N in \[1, 4096\]" "--grace-period-s S in \[0, 3600\]=30" \
  "--metrics-port P" "--log-level"
help_lists estimate "--config FILE (required)" "--instance-type" "--tokens" "--json"
help_lists trace merge check
help_lists "trace merge" "-o,--out FILE" "--no-align"
help_lists "trace check" "FILE"
if grep -q "CPU and CUDA backends" "$TMP/top-help.out"; then
  help_lists bench "--model NAME=125m" "--precision bf16|fp16|fp32|tf32|fp8=bf16" "--steps N >= 1=20"
fi
"$BIN" help prepare > "$TMP/help-prepare.out"
grep -q -- "--tokens-per-shard" "$TMP/help-prepare.out" || fail "hypertrain help prepare"

# Usage errors exit 2 and name the flag: unknown flags, extra arguments,
# missing values, missing required flags, bad values.
usage_error() {  # usage_error "message" args...
  local msg=$1; shift
  set +e
  "$BIN" "$@" > "$TMP/usage.out" 2> "$TMP/usage.err"; local rc=$?
  set -e
  [ $rc -eq 2 ] || { cat "$TMP/usage.err"; fail "hypertrain $* exited $rc, want 2"; }
  grep -qF -- "$msg" "$TMP/usage.err" || fail "hypertrain $*: '$(cat "$TMP/usage.err")' does not say '$msg'"
  [ ! -s "$TMP/usage.out" ] || fail "hypertrain $* wrote to stdout"
}
usage_error "hypertrain train: The following argument was not expected: --frobnicate" train --config "$EXAMPLE" --frobnicate
usage_error "not expected: stray" train --config "$EXAMPLE" stray
usage_error "not expected: b=2" config --config "$EXAMPLE" --set a=1 b=2
usage_error "--config: 1 required FILE missing" train --config
usage_error "hypertrain prepare: --out is required" prepare in.txt
usage_error "hypertrain prepare: INPUT is required" prepare --out "$TMP/never"
usage_error "--tokens-per-shard: must be an integer >= 2, got '1'" prepare --out "$TMP/never" --tokens-per-shard 1 in.txt
usage_error "--bos: must be auto, always or never, got 'sometimes'" prepare --out "$TMP/never" --bos sometimes in.txt
usage_error "not expected: --frob" prepare --frob --out "$TMP/never" in.txt
usage_error "hypertrain tokenize: --tokenizer is required" tokenize
usage_error "hypertrain detokenize: --tokenizer is required" detokenize
usage_error "not expected: --frob" tokenize --tokenizer x --frob
usage_error "hypertrain estimate: --config is required" estimate
usage_error "hypertrain trace: A subcommand is required" trace
usage_error "hypertrain trace merge: INPUT is required" trace merge -o x.json.gz
usage_error "unknown launch flag '--frob'" launch --frob -- train
usage_error "unknown launch flag '--frob'" launch --nproc-per-node 2 --frob 3 train
usage_error "no command to launch" launch --nproc-per-node 2 --
usage_error "--nproc-per-node: must be an integer in [1, 4096], got '0'" launch --nproc-per-node 0 -- train
usage_error "--grace-period-s: must be a number in [0, 3600], got 'soon'" launch --grace-period-s soon -- train
usage_error "unknown command 'frobnicate'" frobnicate
usage_error "hypertrain help: unknown command 'frobnicate'" help frobnicate
[ ! -e "$TMP/never" ] || fail "a usage error created prepare's output"

# --set is repeatable, in both spellings, applied in order (the last wins).
"$BIN" config --config "$EXAMPLE" --set trainer.max_steps=7 --set=model.optim.lr=0.0042 \
  --set trainer.log_every_n_steps=3 --set trainer.max_steps=9 > "$TMP/sets.yaml"
grep -q "^  max_steps: 9$" "$TMP/sets.yaml" || fail "--set trainer.max_steps: $(grep max_steps "$TMP/sets.yaml")"
grep -q "^    lr: 0.0042$" "$TMP/sets.yaml" || fail "--set=model.optim.lr"
grep -q "^  log_every_n_steps: 3$" "$TMP/sets.yaml" || fail "--set trainer.log_every_n_steps"

# launch passes everything after -- (or from the first non-flag) to the
# command untouched, even flags launch or hypertrain know; a hypertrain
# subcommand gets launch's log flags.
node_env=(MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + RANDOM % 20000)) NNODES=1 NODE_RANK=0)
env "${node_env[@]}" "$BIN" launch --nproc-per-node 2 -- /bin/sh -c 'echo "rank $RANK: $*"' sh \
  --nproc-per-node 5 --help -- --log-level x > "$TMP/pass.out" 2> "$TMP/pass.err" || { cat "$TMP/pass.err"; fail "launch -- /bin/sh"; }
for r in 0 1; do
  grep -qxF -- "rank $r: --nproc-per-node 5 --help -- --log-level x" "$TMP/pass.out" || { cat "$TMP/pass.out"; fail "rank $r's arguments"; }
done
env "${node_env[@]}" "$BIN" launch --nproc_per_node=1 /bin/echo --config x.yaml -h > "$TMP/pass2.out" 2>&1 \
  && grep -qx -- "--config x.yaml -h" "$TMP/pass2.out" || { cat "$TMP/pass2.out"; fail "launch without --"; }
env "${node_env[@]}" "$BIN" launch --log-level=warn --nproc-per-node 1 -- config --config "$EXAMPLE" \
  --set trainer.max_steps=11 > "$TMP/pass3.out" 2> "$TMP/pass3.err" || { cat "$TMP/pass3.err"; fail "launch -- config"; }
grep -q "^  max_steps: 11$" "$TMP/pass3.out" || { cat "$TMP/pass3.out"; fail "the launched config's --set"; }
! grep -q "\[info\]" "$TMP/pass3.err" || { cat "$TMP/pass3.err"; fail "--log-level=warn was not passed on"; }

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
# Start-up (core/startup_phases.h): every phase with its duration in the log,
# one "time to first step" line, and the same in the first metrics record,
# whose top-level phases and "other" add up to the time to first step.
for phase in process_start config parallel_setup backend/weight_init backend rendezvous \
             checkpoint_restore data_loader first_step; do
  grep -Eq "start-up: $phase [0-9]+\.[0-9]{3} s$" "$TMP/train.log" || fail "no start-up line for $phase"
done
grep -Eq "start-up: time to first step [0-9]+\.[0-9]{2} s: process_start [0-9.]+, config [0-9.]+, .*first_step [0-9.]+, other [0-9.]+ \(step 1\)$" \
  "$TMP/train.log" || fail "no time-to-first-step line"
head -1 "$TMP/exp/metrics.jsonl" | python3 -c '
import json, sys
r = json.load(sys.stdin)
s = r["startup"]
names = [p["name"] for p in s["phases"]]
top = [p["seconds"] for p in s["phases"] if p["depth"] == 0]
assert r["step"] == 5 and "loss" in r, r
assert "backend/weight_init" in names and "first_step" in names and "rendezvous" in names, names
assert s["time_to_first_step_s"] > 0 and all(x >= 0 for x in top), s
assert abs(sum(top) + s["other_s"] - s["time_to_first_step_s"]) < 0.05, s
' || fail "metrics.jsonl: no consistent start-up record in $(head -1 "$TMP/exp/metrics.jsonl")"
[ "$(grep -c '"startup"' "$TMP/exp/metrics.jsonl")" -eq 1 ] || fail "the start-up record is not written once"

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
grep -Eq '^hypertrain_trainer_time_to_first_step_seconds [0-9]' "$TMP/scrape.txt" || fail "scrape lacks the time to first step"
grep -q "serving Prometheus metrics on :$mport/metrics" "$TMP/launch.log" || fail "no endpoint log line"
grep -q "NCCL net plugin: " "$TMP/launch.log" || fail "no NCCL net plugin preflight line"
pgrep -f "$TMP/exp-launch" >/dev/null && fail "a rank outlived its launcher"

# hypertrain-ckpt: the same conventions (CLI11 subcommands, exit 2 naming
# the argument; a missing checkpoint is 3).
CKPT_BIN="$(dirname "$BIN")/hypertrain-ckpt"
"$CKPT_BIN" --help | grep -q "export-hf" || fail "hypertrain-ckpt --help lists no export-hf"
BIN="$CKPT_BIN" usage_error "hypertrain-ckpt: A subcommand is required"
BIN="$CKPT_BIN" usage_error "hypertrain-ckpt export-hf: out_dir is required" export-hf "$TMP/nowhere"
BIN="$CKPT_BIN" usage_error "--dtype: must be bf16 or fp32, got 'fp64'" export-hf "$TMP/a" "$TMP/b" fp64
set +e
"$CKPT_BIN" verify "$TMP/nowhere" > /dev/null 2> "$TMP/ckpt.err"
[ $? -eq 3 ] || fail "hypertrain-ckpt verify of a missing checkpoint should exit 3"
set -e
grep -q "no manifest.json in $TMP/nowhere" "$TMP/ckpt.err" || fail "hypertrain-ckpt verify names the path"

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
