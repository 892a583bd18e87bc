#!/usr/bin/env bash
# Operator scale benchmark (issue 35 item 7); a benchmark, not a test: it is
# tagged manual and never runs in CI. Prints one BENCH line per scenario: time
# until every pod was created, operator RSS (idle, peak, settled), POSTs
# answered 409.
#   tools/operator-scale-bench.sh               # every scenario on kube-local
#   tools/operator-scale-bench.sh OneJobOf2048Nodes
#   BENCH_REAL_APISERVER=1 tools/operator-scale-bench.sh HundredJobsOf8ThenTwoOf2048
#   BENCH_KUBE_API_QPS=0 tools/operator-scale-bench.sh   # client limiter off
set -euo pipefail
cd "$(dirname "$0")/.."
filter="OperatorScaleBench.${1:-*}"
env_args=()
for v in BENCH_REAL_APISERVER BENCH_KUBE_API_QPS BENCH_KUBE_API_BURST HYPERTRAIN_KUBE_BINARIES; do
  if [[ -n "${!v:-}" ]]; then env_args+=("--test_env=$v=${!v}"); fi
done
bazel test --jobs=2 //operator/cmd:operator_scale_bench --test_output=streamed \
  --test_filter="$filter" --cache_test_results=no "${env_args[@]}" | grep -E '^BENCH|FAIL|SKIP|PASSED' || true
