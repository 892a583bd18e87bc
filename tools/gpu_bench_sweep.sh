#!/usr/bin/env bash
# Run on a GPU machine from the repo root after tools/gpu_bundle.sh (carry .gpu-pack):
#   bash tools/gpu_bench_sweep.sh "label|ENV=V ENV2=V|bench args" ...
# Each variant runs `hypertrain bench` once with its environment (e.g.
# HT_GEMM_AUTOTUNE=0, HT_OVERLAP_OPTIMIZER=0, HT_CUDNN_BWD_WORKSPACE_MB=2048,
# HT_ATTENTION_IMPL=cudnn-fast) and prints its result line under its label, so
# one device call compares several settings of the same build (SWEEP_BIN names
# another hypertrain binary, e.g. an earlier build's, to compare builds). A variant that
# fails or exceeds SWEEP_TIMEOUT seconds (default 150) prints its log tail.
# A variant's LD_LIBRARY_PATH=... in its ENV list picks other CUDA libraries
# (e.g. the cuDNN that PyTorch's wheels bring); the loaded cuDNN is printed.
set -u
R=$(pwd)
[ -d .gpu ] || tar -xJf .gpu-pack/bundle.tar.xz
export NCCL_NVLS_ENABLE=0
. tools/gpu_cuda_libs.sh
export LD_LIBRARY_PATH=$R/.gpu/lib:$CUDA_LIB_DIRS
for v in "$@"; do
  IFS='|' read -r label envs args <<< "$v"
  log=$(mktemp)
  # shellcheck disable=SC2086  # envs and args are word lists by design
  env $envs timeout "${SWEEP_TIMEOUT:-150}" "${SWEEP_BIN:-$R/.gpu/bin/hypertrain}" bench $args > "$log" 2>&1
  rc=$?
  echo "== $label [$envs] bench $args (rc $rc)"
  grep -m1 -oE "cuDNN [0-9]+" "$log"
  grep -E "tok/s|per-op|autotune m=|gemm autotune" "$log" | cut -c1-1500
  [ $rc -eq 0 ] || tail -n 5 "$log"
  rm -f "$log"
done
