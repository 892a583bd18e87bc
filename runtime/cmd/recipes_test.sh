#!/usr/bin/env bash
# The HyperPod recipes (examples/recipes/, verbatim) run as written through the
# real binary on the CPU, given only what the HyperPod launcher supplies
# (base_results_dir, model.data.train_dir) and tiny shape overrides: their
# checkpoint interval, save_top_k, HF export, validation, fine-tuning from HF
# weights, automatic resume, and the errors for what hypertrain does not do.
set -euo pipefail

BIN="$PWD/runtime/cmd/hypertrain"
R="$PWD/examples/recipes"
P1B="$R/hf_llama3_2_1b_seq8k_gpu_p5x1_pretrain.yaml"
P8B="$R/hf_llama3_8b_seq8k_gpu_p5x16_pretrain.yaml"
LORA="$R/hf_llama3_8b_seq8k_gpu_lora.yaml"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*" >&2; exit 1; }
# Tiny shape for the CPU (the recipe's own keys, overridden; one process, so
# one rank per shard group).
TINY=(--set model.num_hidden_layers=2 --set model.hidden_size=64 --set model.num_attention_heads=4
      --set model.num_key_value_heads=2 --set model.intermediate_size=128 --set model.vocab_size=256
      --set model.max_context_width=32 --set model.shard_degree=1 --set trainer.backend=cpu)

# Byte-level data (vocab 256) for the recipes without synthetic data.
for i in $(seq 1 400); do echo "line $i: the quick brown fox jumps over the lazy dog, $((i * 7919 % 1000))"; done > "$TMP/train.txt"
for i in $(seq 1 100); do echo "held out $i: pack my box with five dozen liquor jugs, $((i * 104729 % 977))"; done > "$TMP/val.txt"
"$BIN" prepare --out "$TMP/data" "$TMP/train.txt" 2> /dev/null
"$BIN" prepare --out "$TMP/val" "$TMP/val.txt" 2> /dev/null

expect_exit2() {  # log, needle, command...
  local log=$1 needle=$2
  shift 2
  set +e
  "$@" > "$log" 2>&1
  local rc=$?
  set -e
  [ $rc -eq 2 ] || { cat "$log"; fail "expected exit 2, got $rc: $*"; }
  grep -qF -- "$needle" "$log" || { cat "$log"; fail "expected '$needle'"; }
}

# --- 1B pre-training, as written -------------------------------------------
# Without the launcher's base_results_dir the interpolation names what is missing.
expect_exit2 "$TMP/nobase.log" \
  "run.results_dir: \${base_results_dir}: there is no key 'base_results_dir' in the config (give it with --set base_results_dir=...)" \
  "$BIN" config --config "$P1B"
# `hypertrain config` prints the resolved, typed config.
"$BIN" config --config "$P1B" --set base_results_dir="$TMP/r1" > "$TMP/config.yaml"
grep -q "^  checkpoint_dir: $TMP/r1/llama3.2-1b/checkpoints$" "$TMP/config.yaml" || fail "checkpoint_dir not resolved: $(cat "$TMP/config.yaml")"
grep -q "^  max_context_width: 8192$" "$TMP/config.yaml" || fail "config shape"
grep -q "^  fp8: true$" "$TMP/config.yaml" || fail "fp8: True is FP8"
grep -q "^  activation_checkpointing: none$" "$TMP/config.yaml" || fail "activation_checkpointing: False is none"
grep -q "^  sharded_checkpoints: false$" "$TMP/config.yaml" || fail "save_top_k: 0 turns sharded checkpoints off"
# Train 12 steps: save_top_k 0 = no sharded checkpoints (said at start),
# export_full_model.save_last = HF weights at the end.
# The recipe says use_synthetic_data: True; a train_dir given as well is named
# in the log as the loser (issue 40).
"$BIN" train --config "$P1B" --set base_results_dir="$TMP/r1" "${TINY[@]}" --set trainer.max_steps=12 \
  --set model.data.train_dir="$TMP/data" > "$TMP/p1b.log" 2>&1 || { cat "$TMP/p1b.log"; fail "1b recipe"; }
grep -qF "config: model.data.use_synthetic_data: true wins over model.data.train_dir ($TMP/data): training on synthetic data, the directory is not read" \
  "$TMP/p1b.log" || { cat "$TMP/p1b.log"; fail "no line saying synthetic data wins over train_dir"; }
EXP="$TMP/r1/llama3.2-1b"
grep -q "save_top_k: 0: no sharded checkpoints are written" "$TMP/p1b.log" || fail "no start-up note for save_top_k 0"
grep -q "step 12/12 | loss" "$TMP/p1b.log" || fail "1b: no step 12"
[ -s "$EXP/metrics.jsonl" ] || fail "metrics under the launcher's results dir"
[ -z "$(ls "$EXP/checkpoints" | grep '^step-' || true)" ] || fail "sharded checkpoints written despite save_top_k 0"
[ -s "$EXP/checkpoints/full/step-12/model.safetensors" ] || fail "no HF export at the end"
grep -q '"model_type": "llama"' "$EXP/checkpoints/full/step-12/config.json" || fail "export config.json"
[ ! -e "$EXP/checkpoints/full/.staging" ] || fail "the export's staging directory was left behind: $(ls -a "$EXP/checkpoints/full/.staging")"
find "$TMP" -name '*${*' | grep -q . && fail "a path with a literal \${...} was created"

# Issue 40: the recipes mean what they say. Without tie_word_embeddings the 8B
# recipe is Hugging Face's untied Llama (the 1B recipe ties, as it says);
# Lightning's fractional validation keys are refused saying so.
"$BIN" config --config "$P8B" --set base_results_dir="$TMP/r8" --set model.tensor_model_parallel_degree=1 \
  --set model.data.train_dir="$TMP/data" > "$TMP/config8b.yaml"
grep -q "^  tie_word_embeddings: false$" "$TMP/config8b.yaml" || fail "8b recipe: not untied: $(cat "$TMP/config8b.yaml")"
grep -q "^  tie_word_embeddings: true$" "$TMP/config.yaml" || fail "1b recipe: tie_word_embeddings: true lost"
expect_exit2 "$TMP/frac_vci.log" \
  "trainer.val_check_interval: 0.5 is a fraction (Lightning: of an epoch); fractions are not supported: give a whole number of optimizer steps" \
  "$BIN" train --config "$P1B" --set base_results_dir="$TMP/frac" "${TINY[@]}" --set trainer.val_check_interval=0.5
expect_exit2 "$TMP/frac_lvb.log" \
  "trainer.limit_val_batches: 0.25 is a fraction (Lightning: of the validation set); fractions are not supported: give a whole number of batches" \
  "$BIN" train --config "$P1B" --set base_results_dir="$TMP/frac" "${TINY[@]}" --set trainer.limit_val_batches=0.25
[ ! -e "$TMP/frac" ] || fail "a refused config created its results dir"

# save_top_k 2: checkpoints every 10 steps (step-10 and step-20 of 25;
# save_last False: no extra one at 25); export every 10 as well; resume.
"$BIN" train --config "$P1B" --set base_results_dir="$TMP/r2" "${TINY[@]}" --set trainer.max_steps=25 \
  --set exp_manager.checkpoint_callback_params.save_top_k=2 --set exp_manager.export_full_model.every_n_train_steps=10 \
  > "$TMP/p1b_ck.log" 2>&1 || { cat "$TMP/p1b_ck.log"; fail "1b with checkpoints"; }
CK="$TMP/r2/llama3.2-1b/checkpoints"
[ "$(ls "$CK" | grep '^step-' | sort | tr '\n' ' ')" = "step-10 step-20 " ] || fail "checkpoints: $(ls "$CK")"
[ "$(ls "$CK/full" | sort | tr '\n' ' ')" = "step-10 step-20 step-25 " ] || fail "exports: $(ls -a "$CK/full")"
"$BIN" train --config "$P1B" --set base_results_dir="$TMP/r2" "${TINY[@]}" --set trainer.max_steps=27 \
  --set exp_manager.checkpoint_callback_params.save_top_k=2 > "$TMP/p1b_resume.log" 2>&1 || { cat "$TMP/p1b_resume.log"; fail "resume"; }
grep -q "resumed at step 20" "$TMP/p1b_resume.log" || { cat "$TMP/p1b_resume.log"; fail "no automatic resume from step-20"; }

# auto_checkpoint: the interval comes from the measured stall (here a floor of
# 0.05 s and up to 50% overhead, so that a CPU run of a second saves often).
"$BIN" train --config "$P1B" --set base_results_dir="$TMP/auto" "${TINY[@]}" --set trainer.max_steps=150 \
  --set exp_manager.checkpoint_callback_params.save_top_k=-1 --set exp_manager.auto_checkpoint.enabled=True \
  --set exp_manager.auto_checkpoint.min_interval_s=0.05 --set exp_manager.auto_checkpoint.max_overhead=0.5 \
  > "$TMP/auto.log" 2>&1 || { cat "$TMP/auto.log"; fail "auto_checkpoint run"; }
grep -q "auto_checkpoint: save stall .* -> a checkpoint every" "$TMP/auto.log" || { cat "$TMP/auto.log"; fail "no auto_checkpoint line"; }
[ "$(ls "$TMP/auto/llama3.2-1b/checkpoints" | grep -c '^step-')" -ge 2 ] || { cat "$TMP/auto.log"; fail "auto_checkpoint saved fewer than 2 checkpoints"; }

# Validation: val_dir + limit_val_batches, every 5 steps and at the end,
# deterministic (two runs, same val/loss), in the log and metrics.jsonl.
for run in a b; do
  "$BIN" train --config "$P1B" --set base_results_dir="$TMP/val_$run" "${TINY[@]}" --set trainer.max_steps=12 \
    --set model.data.val_dir="$TMP/val" --set trainer.limit_val_batches=3 --set trainer.val_check_interval=5 \
    > "$TMP/val_$run.log" 2>&1 || { cat "$TMP/val_$run.log"; fail "validation run"; }
done
[ "$(grep -c 'val step' "$TMP/val_a.log")" -eq 3 ] || { cat "$TMP/val_a.log"; fail "expected validation at steps 5, 10, 12"; }
grep -q "val step 12 | val/loss [0-9.]* | perplexity" "$TMP/val_a.log" || fail "val line"
[ "$(grep -c '"val/loss"' "$TMP/val_a/llama3.2-1b/metrics.jsonl")" -eq 3 ] || fail "val/loss in metrics.jsonl"
diff <(grep -o 'val/loss [0-9.]*' "$TMP/val_a.log") <(grep -o 'val/loss [0-9.]*' "$TMP/val_b.log") || fail "validation not deterministic"

# Two Gloo ranks (hybrid shard over both): the periodic export goes through a
# staging save every rank takes part in; validation averages over the ranks.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT HT_GLOO_HOSTNAME=127.0.0.1 HT_RENDEZVOUS_TIMEOUT_S=60 \
  "$BIN" launch --nproc-per-node 2 -- train --config "$P1B" --set base_results_dir="$TMP/two" "${TINY[@]}" \
  --set model.shard_degree=2 --set trainer.max_steps=10 --set exp_manager.export_full_model.every_n_train_steps=5 \
  --set model.data.val_dir="$TMP/val" --set trainer.limit_val_batches=2 --set trainer.val_check_interval=5 \
  > "$TMP/two.log" 2>&1 || { cat "$TMP/two.log"; fail "two ranks"; }
[ "$(ls "$TMP/two/llama3.2-1b/checkpoints/full" | sort | tr '\n' ' ')" = "step-10 step-5 " ] || { cat "$TMP/two.log"; fail "two ranks: exports"; }
[ "$(grep -c 'val step' "$TMP/two.log")" -eq 2 ] || { cat "$TMP/two.log"; fail "two ranks: validation runs once per interval, on rank 0's log"; }
grep -q "HT_GLOO_HOSTNAME=127.0.0.1 sets distributed.gloo_hostname" "$TMP/two.log" || fail "the HT_* override is not logged"

# --- 8B pre-training: asks for tensor parallelism ---------------------------
expect_exit2 "$TMP/p8b.log" \
  "model.tensor_model_parallel_degree: 2: hypertrain does not do tensor parallelism; supported: 1" \
  "$BIN" train --config "$P8B" --set base_results_dir="$TMP/r3" --set model.data.train_dir="$TMP/data"
# With that one key changed it trains on the launcher's data, exporting at the end.
"$BIN" train --config "$P8B" --set base_results_dir="$TMP/r3" --set model.data.train_dir="$TMP/data" "${TINY[@]}" \
  --set model.tensor_model_parallel_degree=1 --set trainer.max_steps=4 > "$TMP/p8b_tp1.log" 2>&1 \
  || { cat "$TMP/p8b_tp1.log"; fail "8b recipe with tp 1"; }
HF="$TMP/r3/llama-8b/checkpoints/full/step-4"
[ -s "$HF/model.safetensors" ] || fail "8b: no HF export"

# --- LoRA fine-tuning: adapters on the frozen base the recipe names --------
expect_exit2 "$TMP/lora_nopath.log" "model.do_finetune: true needs model.hf_model_name_or_path" \
  "$BIN" train --config "$LORA" --set base_results_dir="$TMP/r4" --set model.data.train_dir="$TMP/data"
# The base is the 8B run's export (the same shape); rank 32, alpha 16, dropout
# 0.1 as the recipe says; the adapter is written at the end.
"$BIN" train --config "$LORA" --set base_results_dir="$TMP/r5" --set model.data.train_dir="$TMP/data" "${TINY[@]}" \
  --set model.hf_model_name_or_path="$HF" --set trainer.max_steps=3 > "$TMP/lora.log" 2>&1 \
  || { cat "$TMP/lora.log"; fail "LoRA recipe"; }
grep -q "frozen base loaded from $HF" "$TMP/lora.log" || { cat "$TMP/lora.log"; fail "LoRA: the base is not the HF directory"; }
ADAPTER=$(find "$TMP/r5" -name adapter_config.json | head -1)
[ -n "$ADAPTER" ] && grep -Eq '"r": ?32[,}]?' "$ADAPTER" || { cat "$TMP/lora.log"; fail "LoRA: no adapter with rank 32"; }
[ -s "$(dirname "$ADAPTER")/adapter_model.safetensors" ] || fail "LoRA: no adapter weights"
# Without PEFT the recipe fine-tunes every weight from the HF directory it names
# (here the 8B run's export: the same shape).
"$BIN" train --config "$LORA" --set base_results_dir="$TMP/r4" --set model.data.train_dir="$TMP/data" "${TINY[@]}" \
  --set model.peft.peft_type=null --set model.hf_model_name_or_path="$HF" --set trainer.max_steps=3 \
  > "$TMP/ft.log" 2>&1 || { cat "$TMP/ft.log"; fail "fine-tuning from HF"; }
grep -q "initialised weights from $HF" "$TMP/ft.log" || fail "not initialised from the HF directory"
grep -q "activation checkpointing full" "$TMP/ft.log" || fail "activation_checkpointing: True is full"

# --- Issue 40: exports that load. A base whose config.json and
# generation_config.json are golden transformers v4 / v5 files (the 8B run's
# weights, same shape): the full fine-tune's HF export and the LoRA run's
# merged export keep the base's token ids (eos a list), max_position_embeddings
# 131072 (not the 32 trained at) and RoPE format, i.e. reproduce both files.
GOLD="$PWD/runtime/ckpt/testdata/hf_golden"
for v in transformers-v4 transformers-v5; do
  BASE="$TMP/base-$v"
  mkdir -p "$BASE"
  cp "$HF/model.safetensors" "$GOLD/$v/config.json" "$GOLD/$v/generation_config.json" "$BASE/"
  for kind in full lora; do
    extra=()
    [ "$kind" = full ] && extra=(--set model.peft.peft_type=null)
    "$BIN" train --config "$LORA" --set base_results_dir="$TMP/gold-$kind-$v" --set model.data.train_dir="$TMP/data" \
      "${TINY[@]}" "${extra[@]}" --set model.hf_model_name_or_path="$BASE" --set trainer.max_steps=2 \
      > "$TMP/gold-$kind-$v.log" 2>&1 || { cat "$TMP/gold-$kind-$v.log"; fail "$kind from the $v base"; }
    OUT="$TMP/gold-$kind-$v/llama-8b/checkpoints/full/step-2"
    python3 - "$OUT" "$GOLD/$v" <<'PY' || { cat "$TMP/gold-$kind-$v.log"; fail "$kind export from the $v base differs from the golden files"; }
import json, sys
out, gold = sys.argv[1], sys.argv[2]
for name in ("config.json", "generation_config.json"):
    got, want = json.load(open(f"{out}/{name}")), json.load(open(f"{gold}/{name}"))
    assert got == want, f"{name}:\n got  {json.dumps(got, sort_keys=True)}\n want {json.dumps(want, sort_keys=True)}"
print(out, "matches", gold)
PY
  done
done

echo "PASS"
