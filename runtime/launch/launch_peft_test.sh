#!/usr/bin/env bash
# LoRA under data parallelism through the real binary: `hypertrain launch`
# with 2 ranks (Gloo on 127.0.0.1) trains adapters on a frozen base (dropout
# on) and its loss / grad-norm trajectory matches `hypertrain train` in one
# process accumulating the same global batch (2 micro-batches), with the frozen
# base sharded over the 2 ranks (hybrid_shard's default). Checkpoints of
# the distributed run are written by rank 0 only and hold the adapters.
set -euo pipefail
BIN="${HYPERTRAIN_BIN:-$PWD/runtime/cmd/hypertrain}"
case "$BIN" in /*) ;; *) BIN="$PWD/$BIN" ;; esac
[ -x "$BIN" ] || { echo "FAIL: no hypertrain binary at $BIN" >&2; exit 1; }
TMP="$(mktemp -d "${TEST_TMPDIR:-/tmp}/launch_peft.XXXXXX")"
fail() { echo "FAIL: $*" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1

COMMON=(--config "$PWD/examples/tiny-cpu.yaml" --set model.data.use_synthetic_data=true
        --set trainer.log_every_n_steps=1 --set trainer.max_steps=4 --set trainer.backend=cpu
        --set model.train_batch_size=2 --set model.max_context_width=32 --set model.num_hidden_layers=2
        --set model.peft.peft_type=lora --set model.peft.rank=4 --set model.peft.alpha=8
        --set model.peft.dropout=0.1 --set model.optim.lr=1e-2 --set exp_manager.every_n_train_steps=2)
trajectory() { sed 's/.*"grad_norm":\([^,]*\),"loss":\([^,]*\),.*"step":\([0-9]*\),.*/\3 \2 \1/' "$1"; }

"$BIN" train "${COMMON[@]}" --set model.grad_accumulation_steps=2 --set exp_manager.exp_dir="$TMP/single" \
  > "$TMP/single.log" 2>&1 || { cat "$TMP/single.log"; fail "single process run"; }
trajectory "$TMP/single/metrics.jsonl" > "$TMP/single.traj"

port=$((20000 + (RANDOM % 20000)))
MASTER_ADDR=127.0.0.1 MASTER_PORT=$port NNODES=1 NODE_RANK=0 HYPERTRAIN_JOB_NAME=peft HT_GLOO_HOSTNAME=127.0.0.1 \
  HT_RENDEZVOUS_TIMEOUT_S=60 "$BIN" launch --nproc-per-node 2 --grace-period-s 2 -- train "${COMMON[@]}" \
  --set model.grad_accumulation_steps=1 --set exp_manager.exp_dir="$TMP/dist" > "$TMP/dist.log" 2>&1 ||
  { cat "$TMP/dist.log"; fail "distributed run"; }
grep -q "adapters replicated, gradients averaged over all 2 ranks" "$TMP/dist.log" || { cat "$TMP/dist.log"; fail "no PEFT line"; }
# hybrid_shard (the default) over the node's 2 ranks: the frozen base is sharded.
grep -q "frozen base sharded over the shard group of 2" "$TMP/dist.log" || { cat "$TMP/dist.log"; fail "base not sharded"; }
trajectory "$TMP/dist/metrics.jsonl" > "$TMP/dist.traj"
echo "== step loss grad_norm (single | 2 ranks)"
paste "$TMP/single.traj" "$TMP/dist.traj"
paste "$TMP/single.traj" "$TMP/dist.traj" | awk '
  function abs(x) { return x < 0 ? -x : x }
  { n++; if ($1 != $4) { print "step mismatch"; bad = 1 }
    if (abs($2 - $5) > 1e-5 * abs($2)) { print "loss differs at step " $1; bad = 1 }
    if (abs($3 - $6) > 1e-4 * abs($3)) { print "grad norm differs at step " $1; bad = 1 } }
  END { if (n != 4) { print "expected 4 steps, got " n; bad = 1 } exit bad }' || fail "trajectory"
[ -f "$TMP/dist/checkpoints/step-4/manifest.json" ] || fail "no checkpoint step-4"
grep -q 'lora_A.weight' "$TMP/dist/checkpoints/step-4/manifest.json" || fail "checkpoint without adapters"
grep -q '"ddp"' "$TMP/dist/checkpoints/step-4/manifest.json" || fail "checkpoint world is not ddp"
[ -f "$TMP/dist/adapter/adapter_model.safetensors" ] || fail "no adapter export"
echo "1 passed, 0 failed"
