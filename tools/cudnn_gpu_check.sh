#!/usr/bin/env bash
# One GPU-machine pass for the cuDNN attention work (run from the repo root,
# after tools/gpu_bundle.sh //runtime/kernels/cuda:attention_test
# //runtime/kernels/cuda:attention_layout_test //runtime/kernels/cuda:attention_bench
# //runtime/bench:bench): attention tests, attention_bench (ours vs cuDNN),
# PyTorch's SDPA anchor, and end-to-end steps with each implementation.
# Logs go to ${OUT:-/tmp/cudnn-check}.
set -uo pipefail
out=${OUT:-/tmp/cudnn-check}
mkdir -p "$out"
[ -d .gpu ] || tar -xJf .gpu-pack/bundle.tar.xz
stage=${1:-all}
if [[ $stage == all || $stage == tests ]]; then
  # Each attention test binary with its full log in $out.
  OUT_DIR=$out GPU_TEST_FILTER=NONE .gpu/run.sh bash -c '
    for t in tests/*attention*; do
      timeout '"${TEST_TIMEOUT:-170}"' "$t" >"$OUT_DIR/$(basename "$t").log" 2>&1
      echo "$(basename "$t") rc=$?"
    done' 2>&1 | grep -v "passed, "
  grep -hE "cudnnGetVersion|Failure|FAILED|PASSED|[1-9][0-9]* out of bound|repeated runs|attention:" \
    "$out"/runtime_*attention*.log | head -60
  grep -h -A7 "Failure" "$out"/runtime_*attention*.log | head -60
fi
if [[ $stage == all || $stage == bench ]]; then
  GPU_TEST_FILTER=NONE .gpu/run.sh bash -c \
    'timeout 60 bin/attention_bench --iters=30; timeout 40 bin/attention_bench --iters=30 --fused --impl=tiled,cudnn' \
    >"$out/attention_bench.log" 2>&1
  grep -vE "^\[|passed, " "$out/attention_bench.log" | head -40
  timeout ${TORCH_TIMEOUT:-90} python3 "$(dirname "$0")/sdpa_anchor.py" --iters 30 >"$out/torch.log" 2>&1
  cat "$out/torch.log" | tail -12
fi
if [[ $stage == all || $stage == e2e ]]; then
  for model in ${E2E_MODELS:-125m_16 1b_4}; do
    set -- ${model/_/ }
    for impl in ${E2E_IMPLS:-tiled cudnn cudnn-fast}; do
      echo "== $1 HT_ATTENTION_IMPL=$impl"
      HT_ATTENTION_IMPL=$impl GPU_TEST_FILTER=NONE timeout ${E2E_TIMEOUT:-45} .gpu/run.sh \
        bin/bench --model "$1" --batch "$2" --seq 2048 --steps ${E2E_STEPS:-8} --warmup 3 \
        >"$out/e2e_$1_$impl.log" 2>&1
      grep -vE "^\[|passed, " "$out/e2e_$1_$impl.log" | tail -6
    done
  done
fi
