#!/usr/bin/env bash
# LoRA on one GPU (issue 26), from the repo root. PACK (default .gpu-pack)
# holds bundle.tar.xz from tools/gpu_bundle.sh.
#
#   bash tools/gpu_lora_check.sh            # = tests bench
#   bash tools/gpu_lora_check.sh tests      # LoRA kernel parity, CUDA backend PEFT vs the CPU backend,
#                                           # the LoRA job on CUDA (resume, export), cuBLASLt GEMM, backend
#   bash tools/gpu_lora_check.sh bench      # adapter ops vs the frozen/full projections they sit beside,
#                                           # one block of 1b and 8b at 2x2048 tokens, rank 16
#   bash tools/gpu_lora_check.sh train      # the issue's end-to-end benchmark: `hypertrain train` with
#                                           # LoRA rank 16 on all 7 projections, 2x2048 tokens per step,
#                                           # 1b and 8b, full and selective activation checkpointing;
#                                           # prints median tok/s and peak memory per run
#   bash tools/gpu_lora_check.sh fp8base    # `train` with model.peft.fp8_base (issue 36; PEFT_TYPE=qlora
#                                           # for QLoRA with FP8 GEMMs)
#   bash tools/gpu_lora_check.sh sftq       # 500 steps of real SFT data (PACK/sftdata), bf16 base vs
#                                           # FP8 base from the same seed: loss within 0.5%
#                                           # (SFT_PEFT=qlora: QLoRA on the FP8 base against bf16 LoRA)
#   bash tools/gpu_lora_check.sh qlora      # the same with peft_type qlora (8b, full checkpointing;
#                                           # target <= 16 GiB)
#   bash tools/gpu_lora_check.sh anchor     # tools/bench/peft_anchor.py (plain PyTorch LoRA, the same
#                                           # shapes) on the same machine, right after;
#                                           # ANCHOR_COMPILE="none layer model" picks eager and/or
#                                           # torch.compile per decoder layer / whole model (issue 36)
#   bash tools/gpu_lora_check.sh dp         # 2 GPUs: `hypertrain launch` 2 ranks (NCCL) vs one process
#                                           # accumulating the same global batch (PeftDataParallelHooks)
#   bash tools/gpu_lora_check.sh shard      # 2 GPUs: the frozen base sharded (full_shard, NCCL) vs whole
#                                           # on each rank, bit for bit, LoRA and QLoRA
#                                           # (//tests/ckpt:gpu_peft_shard_test), then `dp` with it on
#
# TRAIN_MODELS (default "1b 8b"), TRAIN_CKPT (default "full selective"), TRAIN_STEPS (default 20),
# LORA_DROPOUT (default 0.1) pick the train runs.
# Anchor (issue 26, plain PyTorch LoRA on one H100): 1b 26.7k tokens/s at 8.6 GiB,
# 8b 7.98k tokens/s at 31.1 GiB; target >= 2x the tokens/s at no more memory.
# Logs go to $OUT (the device tool's folder) or ./lora-out. NVLink multicast stays off.
set -u
R=$(pwd)
PACK=${PACK:-.gpu-pack}
OUTDIR=${OUT:-$R/lora-out}
mkdir -p "$OUTDIR"
[ -d .gpu ] || tar -xJf "$PACK/bundle.tar.xz"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}  # PyTorch (anchor) keeps the machine's own
. tools/gpu_cuda_libs.sh
export LD_LIBRARY_PATH=$R/.gpu/lib:$CUDA_LIB_DIRS
HT=$R/.gpu/bin/hypertrain
rc_all=0
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(tests bench)

# Median of the step lines' tokens/s after the warm-up (steps > 5) from
# metrics.jsonl, the device memory high-water mark (cudaMemGetInfo, CUDA
# context included) and the backend's cudaMalloc total (PyTorch's
# max_memory_allocated analogue) from the log.
summarise() {  # metrics.jsonl, log
  python3 - "$1" "$2" <<'PY'
import json, re, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if "tokens_per_s" in r and r.get("step", 0) > 5]
log = open(sys.argv[2], errors="replace").read()
alloc = re.search(r"allocated ([0-9.]+) GiB in all", log)
if not rows:
    print("   no timed steps"); sys.exit(0)
tps = statistics.median(r["tokens_per_s"] for r in rows)
mem = max(r.get("memory_bytes", 0) for r in rows) / 2**30
print(f"   median {tps/1e3:.2f}k tok/s over {len(rows)} steps | peak device memory {mem:.2f} GiB "
      f"(incl. CUDA context) | allocated {alloc.group(1) if alloc else '?'} GiB")
PY
}

train_bench() {  # model shape, checkpointing[, peft type (lora)[, fp8 base (0)]]
  local shape=$1 ckpt=$2 type=${3:-lora} fp8=${4:-0}
  local label=${3:-lora}$([ "$fp8" = 1 ] && echo -fp8base)-$1-$2
  local exp=/tmp/lora-bench-$label
  rm -rf "$exp"
  timeout 540 "$HT" train --config /dev/null \
    --set trainer.backend=cuda --set trainer.max_steps="${TRAIN_STEPS:-20}" --set trainer.log_every_n_steps=1 \
    --set trainer.precision=bf16 --set model.shape="$shape" --set model.max_context_width=2048 \
    --set model.train_batch_size=2 --set model.activation_checkpointing="$ckpt" \
    --set model.peft.peft_type="$type" --set model.peft.rank=16 \
    --set model.peft.alpha=32 --set model.peft.dropout="${LORA_DROPOUT:-0.1}" \
    --set model.peft.fp8_base="$([ "$fp8" = 1 ] && echo true || echo false)" \
    --set model.data.use_synthetic_data=true \
    --set exp_manager.exp_dir="$exp" --set exp_manager.every_n_train_steps=0 \
    --set exp_manager.checkpoint.save_last=false > "$OUTDIR/train_$label.log" 2>&1
  local rc=$?
  echo "== train $label ($type rank 16 on all 7, 2x2048, $ckpt checkpointing, bf16$([ "$fp8" = 1 ] && echo ', FP8 frozen base')): rc $rc"
  grep -E "peft:|CUDA device|error|Error|Unimplemented" "$OUTDIR/train_$label.log" | head -n 4 | cut -c1-300
  grep -E "step [0-9]+/" "$OUTDIR/train_$label.log" | tail -n 2 | cut -c1-300
  [ -f "$exp/metrics.jsonl" ] && summarise "$exp/metrics.jsonl" "$OUTDIR/train_$label.log"
  [ $rc -eq 0 ] || rc_all=1
}

# Data parallelism on 2 GPUs: one process accumulating 2 micro-batches vs 2
# NCCL ranks with 1 each; same global batch, so the same trajectory up to
# fp32 summation order in the gradient average.
dp_check() {
  local tmp=/tmp/lora-dp common
  rm -rf "$tmp"; mkdir -p "$tmp"
  common=(--config /dev/null --set trainer.backend=cuda --set trainer.precision=bf16
          --set trainer.max_steps=6 --set trainer.log_every_n_steps=1 --set model.shape=tiny
          --set model.num_attention_heads=2 --set model.num_key_value_heads=1
          --set model.max_context_width=256 --set model.train_batch_size=2
          --set model.data.use_synthetic_data=true
          --set model.peft.peft_type=lora --set model.peft.rank=8 --set model.peft.alpha=16
          --set model.peft.dropout=0.1 --set model.optim.lr=1e-2 --set exp_manager.every_n_train_steps=3)
  "$HT" train "${common[@]}" --set model.grad_accumulation_steps=2 --set exp_manager.exp_dir="$tmp/single" \
    > "$OUTDIR/dp_single.log" 2>&1 || { echo "== dp: single process failed"; tail -n 20 "$OUTDIR/dp_single.log"; rc_all=1; return; }
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + RANDOM % 20000)) NNODES=1 NODE_RANK=0 HYPERTRAIN_JOB_NAME=peft \
    HT_RENDEZVOUS_TIMEOUT_S=120 "$HT" launch --nproc-per-node 2 --grace-period-s 5 -- train "${common[@]}" \
    --set model.grad_accumulation_steps=1 --set exp_manager.exp_dir="$tmp/dist" > "$OUTDIR/dp_dist.log" 2>&1 ||
    { echo "== dp: 2 ranks failed"; tail -n 30 "$OUTDIR/dp_dist.log"; rc_all=1; return; }
  python3 - "$tmp/single/metrics.jsonl" "$tmp/dist/metrics.jsonl" "$OUTDIR/dp_dist.log" <<'PY' || rc_all=1
import json, sys
def traj(p):
    return {r["step"]: (r["loss"], r["grad_norm"]) for r in map(json.loads, open(p)) if "grad_norm" in r}
a, b = traj(sys.argv[1]), traj(sys.argv[2])
ok = sorted(a) == sorted(b) == list(range(1, 7))
ok = ok and "adapters replicated, gradients averaged over all 2 ranks" in open(sys.argv[3]).read()
print("== dp: step | loss single, 2 ranks | grad norm single, 2 ranks")
for s in sorted(a):
    (la, ga), (lb, gb) = a[s], b.get(s, (float("nan"), float("nan")))
    print(f"   {s} | {la:.6f} {lb:.6f} | {ga:.5f} {gb:.5f}")
    ok = ok and abs(la - lb) <= 2e-3 * abs(la) and abs(ga - gb) <= 2e-2 * abs(ga)
print("== dp:", "PASS" if ok else "FAIL", "(loss within 2e-3, grad norm within 2e-2 relative)")
sys.exit(0 if ok else 1)
PY
}

# Issue 36's quality check: SFT_STEPS (500) steps of LoRA on real SFT data
# (SFT_DATA: a `prepare --sft` directory, e.g. from tools/bench/sft_from_corpus.py)
# with the bf16 base and with model.peft.fp8_base from the same seed; the
# mean loss of the last 50 steps must agree within 0.5%.
sft_quality() {
  local data=${SFT_DATA:-$PACK/sftdata} shape=${SFT_MODEL:-1b} fp8 exp peft run
  [ -f "$data/manifest.json" ] || { echo "== sftq: no SFT data in $data"; rc_all=1; return; }
  # The bf16 LoRA run, then SFT_PEFT (lora, or qlora: the NF4 base) on the FP8 base.
  for run in "lora false" "${SFT_PEFT:-lora} true"; do
    read -r peft fp8 <<< "$run"
    exp=/tmp/lora-sftq-$fp8
    rm -rf "$exp"
    timeout 400 "$HT" train --config /dev/null \
      --set trainer.backend=cuda --set trainer.max_steps="${SFT_STEPS:-500}" --set trainer.log_every_n_steps=1 \
      --set trainer.precision=bf16 --set model.shape="$shape" --set model.max_context_width=2048 \
      --set model.train_batch_size=2 --set model.activation_checkpointing=selective \
      --set model.peft.peft_type="$peft" --set model.peft.rank=16 --set model.peft.alpha=32 \
      --set model.peft.dropout=0.05 --set model.peft.fp8_base=$fp8 \
      --set model.optim.lr=2e-4 --set model.optim.weight_decay=0 \
      --set model.optim.sched.warmup_steps=20 --set model.data.train_dir="$data" \
      --set exp_manager.exp_dir="$exp" --set exp_manager.every_n_train_steps=0 \
      --set exp_manager.checkpoint.save_last=false > "$OUTDIR/sftq_$fp8.log" 2>&1 ||
      { echo "== sftq fp8_base=$fp8 failed"; tail -n 20 "$OUTDIR/sftq_$fp8.log"; rc_all=1; return; }
  done
  python3 - /tmp/lora-sftq-false/metrics.jsonl /tmp/lora-sftq-true/metrics.jsonl "${SFT_PEFT:-lora}" <<'PY' || rc_all=1
import json, statistics, sys
def losses(p):
    return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r and "step" in r}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
last = sorted(a)[-50:]
ma, mb = statistics.mean(a[s] for s in last), statistics.mean(b[s] for s in last)
print(f"== sftq: {len(a)} steps | loss step 1 {a[min(a)]:.4f} / {b[min(b)]:.4f} | mean of steps "
      f"{last[0]}-{last[-1]}: bf16 LoRA {ma:.4f}, {sys.argv[3]} on the FP8 base {mb:.4f}, "
      f"relative {(mb - ma) / ma:+.3%}")
for s in (1, 100, 200, 300, 400, last[-1]):
    if s in a and s in b:
        print(f"   step {s}: {a[s]:.4f} {b[s]:.4f}")
ok = abs(mb - ma) <= 0.005 * ma
print("== sftq:", "PASS" if ok else "FAIL", "(within 0.5%)")
sys.exit(0 if ok else 1)
PY
  grep -hE "tok/s" "$OUTDIR"/sftq_*.log | tail -n 2 | cut -c1-200
}

# model.peft.fp8_base resumes bit for bit: 8 steps straight vs 4, stop, 4
# more from the checkpoint (the FP8 amax histories travel in it).
fp8_resume() {
  local tmp=/tmp/lora-fp8-resume common
  rm -rf "$tmp"; mkdir -p "$tmp"
  common=(--config /dev/null --set trainer.backend=cuda --set trainer.precision=bf16
          --set trainer.log_every_n_steps=1 --set model.shape=tiny --set model.num_attention_heads=2
          --set model.num_key_value_heads=1 --set model.max_context_width=256
          --set model.train_batch_size=2 --set model.data.use_synthetic_data=true
          --set model.peft.peft_type=lora --set model.peft.rank=8 --set model.peft.alpha=16
          --set model.peft.dropout=0.1 --set model.peft.fp8_base=true --set model.optim.lr=1e-2
          --set model.optim.sched.name=constant)
  "$HT" train "${common[@]}" --set trainer.max_steps=8 --set exp_manager.exp_dir="$tmp/a" \
    > "$OUTDIR/fp8_resume_a.log" 2>&1 &&
  "$HT" train "${common[@]}" --set trainer.max_steps=4 --set exp_manager.exp_dir="$tmp/b" \
    --set exp_manager.every_n_train_steps=4 > "$OUTDIR/fp8_resume_b1.log" 2>&1 &&
  "$HT" train "${common[@]}" --set trainer.max_steps=8 --set exp_manager.exp_dir="$tmp/b" \
    > "$OUTDIR/fp8_resume_b2.log" 2>&1 ||
    { echo "== fp8resume: a run failed"; tail -n 20 "$OUTDIR"/fp8_resume_*.log; rc_all=1; return; }
  python3 - "$tmp/a/metrics.jsonl" "$tmp/b/metrics.jsonl" <<'PY' || rc_all=1
import json, sys
def traj(p):
    return {r["step"]: (r["loss"], r.get("grad_norm")) for r in map(json.loads, open(p)) if "loss" in r and "step" in r}
a, b = traj(sys.argv[1]), traj(sys.argv[2])
same = sorted(a) == list(range(1, 9)) and all(a[s] == b.get(s) for s in a)
for s in sorted(a):
    print(f"   step {s}: {a[s]} {b.get(s)}")
print("== fp8resume:", "PASS (bit-identical)" if same else "FAIL")
sys.exit(0 if same else 1)
PY
}

for mode in "${modes[@]}"; do
  case "$mode" in
    tests)
      GPU_TEST_FILTER=${GPU_TEST_FILTER:-'cuda_lora|cuda_nf4|cuda_gemm|cuda_lm_head|backends_cuda_backend_test|backends_cuda_peft|gpu_peft'} \
        .gpu/run.sh > "$OUTDIR/tests.log" 2>&1 || rc_all=1
      grep -E "^\[(PASS|FAIL)|passed,|Failure|Expected|Which is|actual|error" "$OUTDIR/tests.log" | head -60
      ;;
    bench)
      echo "== lora_bench (CUDA events, median of 30)"
      timeout 300 .gpu/bin/lora_bench > "$OUTDIR/lora_bench.log" 2>&1 || rc_all=1
      cat "$OUTDIR/lora_bench.log" | cut -c1-300
      ;;
    train)
      echo "anchor (PyTorch LoRA, one H100): 1b 26.7k tok/s at 8.6 GiB, 8b 7.98k tok/s at 31.1 GiB; target 2x"
      for m in ${TRAIN_MODELS:-1b 8b}; do
        for ck in ${TRAIN_CKPT:-full selective}; do train_bench "$m" "$ck"; done
      done
      ;;
    fp8base)
      for m in ${TRAIN_MODELS:-1b 8b}; do
        for ck in ${TRAIN_CKPT:-full selective}; do train_bench "$m" "$ck" "${PEFT_TYPE:-lora}" 1; done
      done
      ;;
    sftq) sft_quality ;;
    fp8resume) fp8_resume ;;
    qlora)
      echo "target (issue 26): QLoRA 8b <= 16 GiB"
      for m in ${TRAIN_MODELS:-8b}; do train_bench "$m" "${TRAIN_CKPT:-full}" qlora; done
      ;;
    anchor)
      echo "== tools/bench/peft_anchor.py (plain PyTorch LoRA; ANCHOR_COMPILE=${ANCHOR_COMPILE:-none})"
      for m in ${TRAIN_MODELS:-1b 8b}; do
        for cm in ${ANCHOR_COMPILE:-none}; do
          LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH timeout 540 python3 tools/bench/peft_anchor.py --model "$m" \
            --dropout "${LORA_DROPOUT:-0.1}" --compile "$cm" > "$OUTDIR/anchor_${m}_$cm.log" 2>&1 || rc_all=1
          grep -vE '^\{' "$OUTDIR/anchor_${m}_$cm.log" | tail -n 3 | cut -c1-300
        done
      done
      ;;
    dp) dp_check ;;
    shard)
      GPU_TEST_FILTER=gpu_peft_shard .gpu/run.sh > "$OUTDIR/shard.log" 2>&1 || rc_all=1
      grep -E "^\[(PASS|FAIL)|passed,|Failure|Expected|Which is|rank [0-9]|whole base|differ|error" \
        "$OUTDIR/shard.log" | head -60
      dp_check
      grep -q "frozen base sharded over the shard group of 2" "$OUTDIR/dp_dist.log" ||
        { echo "== shard: the dp run did not shard the base"; rc_all=1; }
      ;;
    *) echo "unknown mode $mode"; rc_all=2 ;;
  esac
done
exit $rc_all
