#!/usr/bin/env bash
# FP8 on one GPU (issue 25), from the repo root. PACK (default .gpu-pack) is
# the carried folder: bundle.tar.xz (tools/gpu_bundle.sh), corpus/ (from
# tools/text_corpus.sh, for the parity run) and the 1b p5 recipe copied from
# ../shared/recipes (for `recipe`):
#
#   bash tools/gpu_fp8_check.sh tests            # FP8 kernel, backend and resume tests (+ bf16 regressions)
#   bash tools/gpu_fp8_check.sh bench            # 125m 16x2048 and 1b 4x2048, bf16 then fp8, same process tree
#   bash tools/gpu_fp8_check.sh variants         # 1b fp8: tensorwise recipe, e4m3 gradients
#   bash tools/gpu_fp8_check.sh untuned          # 1b fp8 and bf16 with cuda.gemm_autotune off
#   bash tools/gpu_fp8_check.sh profile          # 1b per-op profile, bf16 and fp8 (profile125: 125m,
#                                                # profile_fp8: 1b fp8 only)
#   bash tools/gpu_fp8_check.sh parity           # 125m on real text, 4x2048, bf16 vs fp8 from one seed
#   bash tools/gpu_fp8_check.sh parity_head      # the same, fp8 vs fp8 + model.fp8_lm_head
#   bash tools/gpu_fp8_check.sh bench_head       # 125m and 1b fp8 with model.fp8_lm_head
#   bash tools/gpu_fp8_check.sh bench125         # 125m 16x2048: bf16, fp8, fp8 + model.fp8_lm_head
#   bash tools/gpu_fp8_check.sh profile125_head  # 125m per-op profile, fp8 + model.fp8_lm_head
#   bash tools/gpu_fp8_check.sh head_chunks      # 125m fp8 + head in 2 loss chunks (more memory: what chunking costs)
#   bash tools/gpu_fp8_check.sh headtests        # the LM head loss and CUDA backend test binaries
#   bash tools/gpu_fp8_check.sh fp8tests_direct  # the FP8 test binaries with gtest's summaries
#                                                # (PARITY_STEPS: steps of the parity runs, 2000)
#   bash tools/gpu_fp8_check.sh recipe           # the p5 1b recipe as written (fp8: True), 4 steps, 1 GPU
#
# Several modes may be given in one call. Logs and metrics go to $OUT (the
# device tool's folder) or ./fp8-out. NVLink multicast stays off.
set -u
R=$(pwd)
PACK=${PACK:-.gpu-pack}
OUTDIR=${OUT:-$R/fp8-out}
mkdir -p "$OUTDIR"
[ -d .gpu ] || tar -xJf "$PACK/bundle.tar.xz"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
. tools/gpu_cuda_libs.sh
export LD_LIBRARY_PATH=$R/.gpu/lib:$CUDA_LIB_DIRS
HT=$R/.gpu/bin/hypertrain
rc_all=0

bench() {  # label, args...
  local label=$1
  shift
  echo "== bench $label: $*"
  local log=/tmp/bench_$label.log
  timeout 300 "$HT" bench --json "$OUTDIR/bench.jsonl" "$@" > "$log" 2>&1
  local rc=$?
  { echo "== bench $label: $* (rc $rc)"; cat "$log"; } >> "$OUTDIR/bench.log"
  grep -E "tok/s|block GEMMs|per-op" "$log" | cut -c1-900
  [ $rc -eq 0 ] || { tail -n 8 "$log"; rc_all=1; }
}

parity_run() {  # label, steps, extra --set...
  local label=$1 steps=$2
  shift 2
  local exp=/tmp/fp8-parity-$label
  rm -rf "$exp"
  local t0=$SECONDS
  timeout "${PARITY_TIMEOUT:-240}" "$HT" train --config /dev/null \
    --set trainer.backend=cuda --set trainer.max_steps="$steps" --set trainer.log_every_n_steps=1 \
    --set trainer.precision=bf16 --set model.shape=125m --set model.max_context_width=2048 \
    --set model.train_batch_size=4 --set model.seed=1234 --set model.grad_clip=1.0 \
    --set model.optim.lr=6e-4 --set model.optim.weight_decay=0.1 \
    --set model.optim.sched.warmup_steps=200 --set model.optim.sched.min_lr=6e-5 \
    --set model.data.train_dir=/tmp/fp8-corpus --set exp_manager.exp_dir="$exp" \
    --set exp_manager.every_n_train_steps=0 --set exp_manager.checkpoint.save_last=false "$@" \
    > "$OUTDIR/parity_$label.log" 2>&1
  local rc=$?
  echo "== parity $label ($*): rc $rc, $((SECONDS - t0)) s"
  grep -E "fp8:|data:|done:" "$OUTDIR/parity_$label.log" | cut -c1-300
  tail -n 2 "$OUTDIR/parity_$label.log" | cut -c1-300
  cp "$exp/metrics.jsonl" "$OUTDIR/parity_$label.jsonl" 2>/dev/null
  [ $rc -eq 0 ] || rc_all=1
}

do_parity() {  # both | fp8
      # Real text (tools/text_corpus.sh) with the Llama-2 tokenizer (the 125m vocabulary).
      if [ ! -d /tmp/fp8-corpus ]; then
        "$HT" prepare --tokenizer "$PACK/corpus/tokenizer" --out /tmp/fp8-corpus \
          "$PACK/corpus/corpus.jsonl.gz" 2>&1 | tail -n 3
      fi
      steps=${PARITY_STEPS:-2000}
      [ "$1" = fp8 ] || parity_run bf16 "$steps"
      parity_run fp8 "$steps" --set model.fp8=true
}

for mode in "$@"; do
  case "$mode" in
    tests)
      GPU_TEST_FILTER=${GPU_TEST_FILTER:-'fp8|cuda_gemm|backends_cuda_backend_test|gpu_resume|op_profile'} \
        .gpu/run.sh > "$OUTDIR/tests.log" 2>&1 || rc_all=1
      grep -E "^\[(PASS|FAIL)|passed,|Failure|Expected|Which is|actual|error" "$OUTDIR/tests.log" | head -60
      ;;
    fp8tests)  # only the FP8 GPU tests (kernels, backend)
      GPU_TEST_FILTER='cuda_fp8|fp8_backend' .gpu/run.sh > "$OUTDIR/tests.log" 2>&1 || rc_all=1
      grep -E "^\[(PASS|FAIL)|passed,|Failure|Expected|Which is|actual|error" "$OUTDIR/tests.log" | head -40
      ;;
    resume)  # the FP8 resume test alone
      ( . tools/gpu_cuda_libs.sh; timeout 120 .gpu/tests/runtime_ckpt_gpu_resume_test --gtest_filter='*Fp8*' ) \
        > "$OUTDIR/resume.log" 2>&1 || rc_all=1
      grep -E "OK \]|FAILED|Failure|Expected|Which is" "$OUTDIR/resume.log" | head -20
      ;;
    bench_final)  # most needed first
      bench 1b_fp8_profile --model 1b --batch 4 --seq 2048 --steps 10 --profile 1 --precision fp8
      bench 125m_fp8 --model 125m --batch 16 --seq 2048 --precision fp8
      bench 125m_bf16 --model 125m --batch 16 --seq 2048
      ;;
    bench_1b_bf16)
      bench 1b_bf16 --model 1b --batch 4 --seq 2048
      ;;
    parity_fp8) do_parity fp8 ;;  # the FP8 half only (the bf16 half of the same code ran before)
    bench)
      bench 125m_bf16 --model 125m --batch 16 --seq 2048
      bench 125m_fp8 --model 125m --batch 16 --seq 2048 --precision fp8
      bench 1b_bf16 --model 1b --batch 4 --seq 2048
      bench 1b_fp8 --model 1b --batch 4 --seq 2048 --precision fp8
      ;;
    bench125)  # the 125m target's three runs, back to back
      bench 125m_bf16 --model 125m --batch 16 --seq 2048
      bench 125m_fp8 --model 125m --batch 16 --seq 2048 --precision fp8
      bench 125m_fp8_head --model 125m --batch 16 --seq 2048 --precision fp8 --fp8-lm-head 1
      ;;
    head_chunks)
      bench 125m_fp8_head_2chunks --model 125m --batch 16 --seq 2048 --precision fp8 --fp8-lm-head 1 \
        --loss-chunk-rows 16384
      ;;
    profile125_head)
      bench 125m_fp8_head_profile --model 125m --batch 16 --seq 2048 --steps 10 --profile 1 \
        --precision fp8 --fp8-lm-head 1
      ;;
    headtests)  # bf16 regressions of what the FP8 head touches, gtest's own summaries
      for t in .gpu/tests/*lm_head_loss_test .gpu/tests/runtime_backends_cuda_backend_test; do
        [ -x "$t" ] || continue
        timeout 300 "$t" > "$OUTDIR/$(basename "$t").log" 2>&1 || rc_all=1
        echo "== $(basename "$t"): $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUTDIR/$(basename "$t").log" | tr '\n' ' ')"
        grep -E "^\[  FAILED  \]|Failure|Expected|Which is|actual" "$OUTDIR/$(basename "$t").log" | head -20
      done
      ;;
    bench_head)  # FP8 with the LM head in FP8 too
      bench 125m_fp8_head --model 125m --batch 16 --seq 2048 --precision fp8 --fp8-lm-head 1
      bench 1b_fp8_head --model 1b --batch 4 --seq 2048 --precision fp8 --fp8-lm-head 1
      ;;
    untuned)  # what the GEMM autotuning gives (compare with `bench` in the same call)
      bench 1b_fp8_untuned --model 1b --batch 4 --seq 2048 --precision fp8 --gemm-autotune off
      bench 1b_bf16_untuned --model 1b --batch 4 --seq 2048 --gemm-autotune off
      ;;
    variants)
      bench 1b_fp8_tensorwise --model 1b --batch 4 --seq 2048 --precision fp8 --fp8-recipe tensorwise
      bench 1b_fp8_e4m3grad --model 1b --batch 4 --seq 2048 --precision fp8 --fp8-grad e4m3
      ;;
    profile)
      bench 1b_bf16_profile --model 1b --batch 4 --seq 2048 --steps 10 --profile 1
      bench 1b_fp8_profile --model 1b --batch 4 --seq 2048 --steps 10 --profile 1 --precision fp8
      ;;
    profile_fp8)  # 1b per-op profile, fp8 only (the bf16 one does not change with FP8 work)
      bench 1b_fp8_profile --model 1b --batch 4 --seq 2048 --steps 10 --profile 1 --precision fp8
      ;;
    profile125)
      bench 125m_bf16_profile --model 125m --batch 16 --seq 2048 --steps 10 --profile 1
      bench 125m_fp8_profile --model 125m --batch 16 --seq 2048 --steps 10 --profile 1 --precision fp8
      ;;
    parity) do_parity both ;;
    parity_head)  # 125m on real text: FP8 blocks vs FP8 blocks + FP8 LM head (model.fp8_lm_head)
      if [ ! -d /tmp/fp8-corpus ]; then
        "$HT" prepare --tokenizer "$PACK/corpus/tokenizer" --out /tmp/fp8-corpus \
          "$PACK/corpus/corpus.jsonl.gz" 2>&1 | tail -n 3
      fi
      parity_run fp8 "${PARITY_STEPS:-2000}" --set model.fp8=true
      parity_run fp8_head "${PARITY_STEPS:-2000}" --set model.fp8=true --set model.fp8_lm_head=true
      ;;
    fp8tests_direct)  # the FP8 GPU test binaries one by one, gtest's own summary
      for t in .gpu/tests/*fp8* .gpu/tests/*gpu_resume*; do
        [ -x "$t" ] || continue
        filter='*'
        [[ "$t" == *gpu_resume* ]] && filter='*Fp8*'
        timeout 300 "$t" --gtest_filter="$filter" > "$OUTDIR/$(basename "$t").log" 2>&1 || rc_all=1
        echo "== $(basename "$t"): $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUTDIR/$(basename "$t").log" | tr '\n' ' ')"
        grep -E "^\[  FAILED  \]|Failure|Expected|Which is|actual" "$OUTDIR/$(basename "$t").log" | head -20
      done
      ;;
    recipe)
      exp=/tmp/fp8-recipe
      rm -rf "$exp"
      # As written plus what the HyperPod launcher supplies (base_results_dir), on one
      # GPU: shard_degree 8 would need 8 ranks. No export at the end (disk, time).
      timeout 300 "$HT" train --config "$PACK/hf_llama3_2_1b_seq8k_gpu_p5x1_pretrain.yaml" \
        --set base_results_dir=$exp --set trainer.backend=cuda --set trainer.max_steps=4 \
        --set model.shard_degree=1 --set exp_manager.export_full_model.save_last=false \
        > "$OUTDIR/recipe.log" 2>&1 || rc_all=1
      grep -E "fp8|step [0-9]|done|error|cuda\]" "$OUTDIR/recipe.log" | cut -c1-300
      ;;
    *) echo "unknown mode $mode"; rc_all=2 ;;
  esac
done
exit $rc_all
