#!/usr/bin/env bash
# --log-format json covers every line a command writes to stderr (issue 40):
# usage errors (unknown flag, unknown command, a missing value), config
# errors, prepare's progress lines, training's start-up and step lines, and
# the launcher with its rank. Each stderr line must parse as one JSON object
# with time, level and msg.
set -euo pipefail
BIN="${HYPERTRAIN_BIN:-$PWD/runtime/cmd/hypertrain}"
TMP="$(mktemp -d "${TEST_TMPDIR:-/tmp}/log_json.XXXXXX")"
fail() { echo "FAIL: $*" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
passed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }

all_json() {  # $1 = stderr file, $2 = a msg substring that must appear
  python3 - "$1" "$2" <<'PY' || { cat "$1"; fail "$1: not every line is a JSON log line with '$2'"; }
import json, sys
path, want = sys.argv[1], sys.argv[2]
lines = open(path, encoding="utf-8").read().split("\n")
assert lines[-1] == "", "no final newline"
found = False
for n, line in enumerate(lines[:-1], 1):
    j = json.loads(line)
    assert isinstance(j, dict) and {"time", "level", "msg"} <= set(j), f"line {n}: {line}"
    found = found or want in j["msg"]
assert found, f"no line with {want!r}"
print(f"{path}: {len(lines) - 1} JSON lines")
PY
}
run() {  # $1 = name, $2 = expected exit code, rest = args
  local name=$1 want=$2 rc=0
  shift 2
  "$BIN" "$@" > "$TMP/$name.out" 2> "$TMP/$name.err" || rc=$?
  [ "$rc" -eq "$want" ] || { cat "$TMP/$name.err"; fail "$name: exit $rc, want $want"; }
}

run badflag 2 --log-format=json train --frobnicate
all_json "$TMP/badflag.err" "--frobnicate"
grep -q '"level":"error"' "$TMP/badflag.err" || fail "a usage error is not at level error"
run badflag2 2 train --config x.yaml --log-format json --frobnicate
all_json "$TMP/badflag2.err" "--frobnicate"
run nocmd 2 --log-format json frobnicate
all_json "$TMP/nocmd.err" "unknown command 'frobnicate'"
run novalue 2 --log-format=json estimate --config
all_json "$TMP/novalue.err" "--config"
run help 2 --log-format=json help frobnicate
all_json "$TMP/help.err" "unknown command 'frobnicate'"
run noconfig 2 --log-format=json train --config "$TMP/missing.yaml"
all_json "$TMP/noconfig.err" "$TMP/missing.yaml"
# Text stays text.
run textflag 2 train --frobnicate
grep -q "^hypertrain train: The following argument was not expected: --frobnicate" "$TMP/textflag.err" ||
  { cat "$TMP/textflag.err"; fail "text usage error changed"; }
pass "usage and config errors are JSON lines at level error"

for i in $(seq 1 400); do echo "line $i: the quick brown fox jumps over the lazy dog"; done > "$TMP/in.txt"
run prepare 0 --log-format=json prepare --out "$TMP/data" "$TMP/in.txt"
all_json "$TMP/prepare.err" "prepare: "
grep -q 'MB/s' "$TMP/prepare.err" || fail "no progress line"
pass "prepare's progress lines are JSON lines"

TRAIN=(train --config "$PWD/examples/tiny-cpu.yaml" --set model.data.train_dir="$TMP/data" --set trainer.max_steps=3
       --set trainer.log_every_n_steps=1 --set model.max_context_width=32 --set model.train_batch_size=2
       --set model.num_hidden_layers=2)
run train 0 --log-format=json "${TRAIN[@]}" --set exp_manager.exp_dir="$TMP/exp"
all_json "$TMP/train.err" "step 3/3 | loss"
pass "training's lines are JSON lines"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT HT_GLOO_HOSTNAME=127.0.0.1 run launch 0 --log-format=json launch \
  --nproc-per-node 2 -- "${TRAIN[@]}" --set exp_manager.exp_dir="$TMP/exp2" --set model.shard_degree=2
all_json "$TMP/launch.err" "step 3/3 | loss"
grep -q '"rank":"1"' "$TMP/launch.err" || { cat "$TMP/launch.err"; fail "rank 1's lines are not JSON with its rank"; }
pass "the launcher and its ranks write JSON lines"

echo "$passed passed, 0 failed"
