#!/usr/bin/env bash
# Run on a GPU machine from the repo root after tools/gpu_bundle.sh (carry .gpu-pack):
#   bash tools/gpu_bench_sweep.sh "label|ENV=V ENV2=V|bench args" ...
# Each variant runs `hypertrain bench` once with its environment (e.g.
# HT_GEMM_AUTOTUNE=0, HT_OVERLAP_OPTIMIZER=0, HT_CUDNN_BWD_WORKSPACE_MB=2048,
# HT_ATTENTION_IMPL=cudnn-fast) and prints its result line under its label, so
# one device call compares several settings of the same build (SWEEP_BIN names
# another hypertrain binary, e.g. an earlier build's, to compare builds). A variant that
# fails or exceeds SWEEP_TIMEOUT seconds (default 150) prints its log tail.
set -u
R=$(pwd)
[ -d .gpu ] || tar -xJf .gpu-pack/bundle.tar.xz
export NCCL_NVLS_ENABLE=0
d=/usr/local/cuda/lib64
for n in libcudnn.so.9 libnccl.so.2; do x=$(find / -xdev -name $n 2>/dev/null | head -1); [ -n "$x" ] && d="$d:$(dirname $x)"; done
export LD_LIBRARY_PATH=$R/.gpu/lib:$d
for v in "$@"; do
  IFS='|' read -r label envs args <<< "$v"
  log=$(mktemp)
  # shellcheck disable=SC2086  # envs and args are word lists by design
  env $envs timeout "${SWEEP_TIMEOUT:-150}" "${SWEEP_BIN:-$R/.gpu/bin/hypertrain}" bench $args > "$log" 2>&1
  rc=$?
  echo "== $label [$envs] bench $args (rc $rc)"
  grep -E "tok/s|per-op|autotune m=|gemm autotune" "$log" | cut -c1-1500
  [ $rc -eq 0 ] || tail -n 5 "$log"
  rm -f "$log"
done
