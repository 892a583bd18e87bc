#!/usr/bin/env bash
# Runs every test (the README's test command): installs what is missing,
# builds everything offline, runs all tests, and ends with one line
# "N passed, N failed[, N skipped]" counted per test case.
#
# With the CUDA toolkit (at $CUDA_HOME, default /usr/local/cuda) this is the
# CUDA build; its GPU tests skip without a GPU. It then also checks the
# CPU-only configuration with the toolkit hidden (tools/cpu_only_check.sh).
# Without a toolkit, or with --config=cpu, the build is CPU-only and the CUDA
# tests are counted as skipped, with the reason.
# Where no GPU is visible, device code is compiled for sm_90a only (a compile
# check; --define=cuda_arch=... on the command line overrides that).
#   tools/test.sh [bazel test flags, e.g. --config=cpu]
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1
echo "== setup: $SECONDS s"
export PATH="$HOME/.cache/hypertrain/bin:$PATH"

. tools/cuda_detect.sh
skip_reason=""
if [[ " $* " == *" --config=cpu "* ]]; then
  skip_reason="CUDA, not built: CPU-only build (--config=cpu)"
elif [ -n "$CPU_ONLY_REASON" ]; then
  skip_reason="CUDA, not built: CPU-only build, $CPU_ONLY_REASON"
fi

# No GPU visible: nothing will run device code, so it is compiled once (sm_90a)
# to check that it compiles, not for all four targets (tools/cuda.bzl).
flags=("$@")
if [ -z "$skip_reason" ] && [[ " $* " != *" --define=cuda_arch="* ]] && ! nvidia-smi -L 2>/dev/null | grep -q "^GPU "; then
  flags+=(--define=cuda_arch=compile_check)
  echo "== no GPU visible: device code compiled for sm_90a only (--define=cuda_arch=compile_check)"
fi
set -- "${flags[@]}"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# One command builds everything (every target of //..., not only the tests')
# and runs the tests as their dependencies are built: a test that waits on
# its processes leaves a core to the compiles.
t0=$SECONDS
# Compiler warnings and progress lines stay out of the log; errors and
# failing tests' output do not.
bazel test //... --keep_going --noshow_progress --output_filter=DONT_MATCH_ANYTHING "$@" 2>&1 |
  tee "$out/test.log"
status=${PIPESTATUS[0]}
echo "== build and tests: $((SECONDS - t0)) s"
# Per-target results from Bazel's summary, e.g. "//a:b   PASSED in 1.2s";
# SKIPPED: a target this build leaves out (the CUDA tests of a CPU-only build).
grep -E '^//[^ ]+ +(\(cached\) )?(PASSED|FAILED|TIMEOUT|FLAKY|NO STATUS|FAILED TO BUILD|INCOMPLETE|SKIPPED)' "$out/test.log" \
  | sed -E 's/\(cached\) //; s/^(\/\/[^ ]+) +(PASSED|FAILED TO BUILD|FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE|SKIPPED).*/\1 \2/; s/FAILED TO BUILD/BUILD_FAILED/; s/NO STATUS/NO_STATUS/' \
  > "$out/targets"
testlogs="$(bazel info bazel-testlogs "$@" 2>/dev/null)"

# Layering: the trainer never depends on the operator or the local cluster.
if path="$(bazel query 'somepath(//runtime/..., //operator/... + //localcluster/...)' 2>/dev/null)" && [ -z "$path" ]; then
  echo "layering:runtime-not-on-operator PASSED" >> "$out/targets"
else
  echo "layering: a dependency path from //runtime to the operator or the local cluster:"; echo "$path"
  echo "layering:runtime-not-on-operator FAILED" >> "$out/targets"
fi

# The CPU-only configuration, where this run was the CUDA build.
if [ -z "$skip_reason" ]; then
  echo "== the CPU-only configuration (CUDA toolkit hidden): tools/cpu_only_check.sh"
  t0=$SECONDS
  tools/cpu_only_check.sh "$out/targets" | grep -v '^[0-9]* passed, [0-9]* failed$'
  echo "== cpu-only check: $((SECONDS - t0)) s"
fi

python3 tools/test_summary.py "$testlogs" "$out/targets" "$skip_reason"
summary=$?
if [ "$status" -ne 0 ] && [ "$summary" -eq 0 ]; then
  echo "bazel test exited $status (build or analysis failure)"
  echo "0 passed, 1 failed"
  exit 1
fi
exit $summary
