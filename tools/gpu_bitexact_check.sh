#!/usr/bin/env bash
# A refactor leaves the GPU bits alone (issue 37): the same short training runs
# with two builds of `hypertrain` in one call on one GPU, and every step's loss
# and gradient norm compared as the exact decimal strings metrics.jsonl holds.
# From the repo root, on the device:
#
#   bash tools/gpu_bitexact_check.sh OLD_BUNDLE [NEW_BUNDLE]
#
# Bundles are tools/gpu_bundle.sh archives (NEW_BUNDLE defaults to
# .gpu-pack/bundle.tar.xz). Runs, 125m on synthetic data, STEPS (default 8)
# steps each: bf16 full training, FP8 block GEMMs (model.fp8), LoRA rank 16,
# LoRA on an FP8 base (model.peft.fp8_base), QLoRA, and QLoRA on an FP8 base.
# ONLY (a regex of those labels: bf16 fp8 lora lora_fp8base qlora
# qlora_fp8base) picks some. Exit 0 when every run matches, 1 when any
# differs or fails. Logs go to $OUT or ./bitexact-out. NVLink multicast stays off.
set -u
R=$(pwd)
OLD=${1:?usage: gpu_bitexact_check.sh OLD_BUNDLE [NEW_BUNDLE]}
NEW=${2:-.gpu-pack/bundle.tar.xz}
OUTDIR=${OUT:-$R/bitexact-out}
STEPS=${STEPS:-8}
mkdir -p "$OUTDIR" /tmp/bitexact/old /tmp/bitexact/new
tar -xJf "$OLD" -C /tmp/bitexact/old || { echo "cannot unpack $OLD" >&2; exit 1; }
tar -xJf "$NEW" -C /tmp/bitexact/new || { echo "cannot unpack $NEW" >&2; exit 1; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
. tools/gpu_cuda_libs.sh

run() {  # build(old|new) label extra --set...
  local build=$1 label=$2
  shift 2
  local exp=/tmp/bitexact/exp-$build-$label
  rm -rf "$exp"
  LD_LIBRARY_PATH=/tmp/bitexact/$build/.gpu/lib:$CUDA_LIB_DIRS timeout 120 \
    /tmp/bitexact/$build/.gpu/bin/hypertrain train --config /dev/null \
    --set trainer.backend=cuda --set trainer.max_steps="$STEPS" --set trainer.log_every_n_steps=1 \
    --set trainer.precision=bf16 --set model.shape=125m --set model.max_context_width=1024 \
    --set model.train_batch_size=2 --set model.seed=1234 --set model.grad_clip=1.0 \
    --set model.data.use_synthetic_data=true --set exp_manager.exp_dir="$exp" \
    --set exp_manager.every_n_train_steps=0 --set exp_manager.checkpoint.save_last=false "$@" \
    > "$OUTDIR/$build-$label.log" 2>&1 || { echo "$build $label: exit $? (log $OUTDIR/$build-$label.log)"; tail -n 5 "$OUTDIR/$build-$label.log"; return 1; }
  # The exact loss and grad_norm text of every step line, in step order.
  grep -o '"step":[0-9]*\|"loss":[^,}]*\|"grad_norm":[^,}]*' "$exp/metrics.jsonl" | paste -d' ' - - - > "$OUTDIR/$build-$label.steps"
}

rc=0
adapters=(--set model.peft.rank=16 --set model.peft.alpha=32 --set model.peft.dropout=0.1)
lora=(--set model.peft.peft_type=lora "${adapters[@]}")
qlora=(--set model.peft.peft_type=qlora "${adapters[@]}")
for spec in "bf16:" "fp8:--set model.fp8=true" "lora:${lora[*]}" "lora_fp8base:${lora[*]} --set model.peft.fp8_base=true" \
            "qlora:${qlora[*]}" "qlora_fp8base:${qlora[*]} --set model.peft.fp8_base=true"; do
  label=${spec%%:*}
  [[ "$label" =~ ^(${ONLY:-.*})$ ]] || continue
  read -r -a extra <<< "${spec#*:}"
  run old "$label" "${extra[@]}" && run new "$label" "${extra[@]}" || { rc=1; continue; }
  n=$(wc -l < "$OUTDIR/new-$label.steps")
  if [ "$n" -lt "$STEPS" ]; then
    echo "$label: only $n step lines (want $STEPS)"; rc=1
  elif cmp -s "$OUTDIR/old-$label.steps" "$OUTDIR/new-$label.steps"; then
    echo "$label: $n steps, loss and grad_norm bit-identical ($(tail -n 1 "$OUTDIR/new-$label.steps"))"
  else
    echo "$label: DIFFERS"; diff "$OUTDIR/old-$label.steps" "$OUTDIR/new-$label.steps" | head -n 6; rc=1
  fi
done
nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1
exit $rc
