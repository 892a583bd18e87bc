#!/usr/bin/env bash
# Runs every test (the README's test command): installs what is missing,
# builds everything offline, runs all tests, and ends with one line
# "N passed, N failed[, N skipped]" counted per test case.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1
export PATH="$HOME/.cache/hypertrain/bin:$PATH"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bazel build //... 2>&1 | tee "$out/build.log" | grep -E "^(ERROR|FAIL)" || true
bazel test //... --keep_going "$@" 2>&1 | tee "$out/test.log"
status=${PIPESTATUS[0]}
# Per-target results from Bazel's summary, e.g. "//a:b   PASSED in 1.2s".
grep -E '^//[^ ]+ +(\(cached\) )?(PASSED|FAILED|TIMEOUT|FLAKY|NO STATUS|FAILED TO BUILD|INCOMPLETE)' "$out/test.log" \
  | sed -E 's/\(cached\) //; s/^(\/\/[^ ]+) +(PASSED|FAILED TO BUILD|FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE).*/\1 \2/; s/FAILED TO BUILD/BUILD_FAILED/; s/NO STATUS/NO_STATUS/' \
  > "$out/targets"
python3 tools/test_summary.py "$(bazel info bazel-testlogs 2>/dev/null)" "$out/targets"
summary=$?
if [ "$status" -ne 0 ] && [ "$summary" -eq 0 ]; then
  echo "bazel test exited $status (build or analysis failure)"
  echo "0 passed, 1 failed"
  exit 1
fi
exit $summary
