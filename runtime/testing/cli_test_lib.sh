# What the shell tests that drive the real `hypertrain` binary share; sourced
# (after `set -euo pipefail`) from the workspace root, as `bazel test` runs
# them: the binary, the tiny CPU config, a temporary directory, `fail`, and a
# small tokenized data set.
#   source runtime/testing/cli_test_lib.sh
#   cli_test_init peer_death        # sets TMP
#   prepare_text_data "$TMP/data"
BIN="${HYPERTRAIN_BIN:-$PWD/runtime/cmd/hypertrain}"
CONFIG="$PWD/examples/tiny-cpu.yaml"
export OPENBLAS_NUM_THREADS=1

fail() { echo "FAIL: $*" >&2; exit 1; }

cli_test_init() {  # $1 = test name: TMP becomes a fresh directory for it
  TMP="$(mktemp -d "${TEST_TMPDIR:-/tmp}/$1.XXXXXX")"
}

prepare_text_data() {  # $1 = output directory: 3000 generated lines, tokenized
  for i in $(seq 1 3000); do echo "line $i: the quick brown fox jumps over the lazy dog"; done > "$TMP/gen.txt"
  "$BIN" prepare --out "$1" --tokens-per-shard 100000 "$TMP/gen.txt" 2> "$TMP/prepare.log" ||
    { cat "$TMP/prepare.log"; fail "prepare"; }
}
