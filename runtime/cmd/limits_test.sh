#!/usr/bin/env bash
# Inputs that used to abort or grow without bound (issue 40, item 4), each
# through a real `hypertrain train` under a memory cap (ulimit -v) and a time
# cap, so that a regression fails here instead of eating the machine: each
# exits 2 naming the key, well within the time bound. The tiny run trains
# under the same caps (the memory check refuses only what cannot fit).
set -euo pipefail
BIN="$PWD/runtime/cmd/hypertrain"
CONFIG="$PWD/examples/tiny-cpu.yaml"
TMP="$(mktemp -d "${TEST_TMPDIR:-/tmp}/limits.XXXXXX")"
fail() { echo "FAIL: $*" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
passed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
MEM_KB=6000000   # 6 GB of address space per process
MAX_S=10         # generous: each answer takes milliseconds

for i in $(seq 1 2000); do echo "line $i: the quick brown fox jumps over the lazy dog"; done > "$TMP/in.txt"
"$BIN" prepare --out "$TMP/data" "$TMP/in.txt" 2> "$TMP/prepare.log"
COMMON=(--set model.data.train_dir="$TMP/data" --set trainer.max_steps=2 --set model.train_batch_size=2
        --set model.max_context_width=32)

run() {  # $1 = name, rest = train args; sets rc, ms
  local name="$1" start; shift
  start=$(date +%s%N)
  rc=0
  (ulimit -v "$MEM_KB"; exec timeout "$MAX_S" "$BIN" train "$@") > "$TMP/$name.log" 2>&1 || rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
}
expect2() {  # $1 = name, $2 = text the message must hold, rest = train args
  local name="$1" want="$2"; shift 2
  run "$name" "$@"
  [ "$rc" -eq 2 ] || { cat "$TMP/$name.log"; fail "$name: exit $rc, want 2 (124: over ${MAX_S}s; 134/139: abort)"; }
  grep -qF -- "$want" "$TMP/$name.log" || { cat "$TMP/$name.log"; fail "$name: the message does not say '$want'"; }
  pass "$name: exit 2 in ${ms} ms: $(grep -F -- "$want" "$TMP/$name.log" | head -1 | cut -c1-220)"
}

run tiny --config "$CONFIG" --set exp_manager.exp_dir="$TMP/exp" "${COMMON[@]}"
[ "$rc" -eq 0 ] || { cat "$TMP/tiny.log"; fail "the tiny run under the caps: exit $rc"; }
pass "the tiny model trains under ulimit -v $MEM_KB"

X=(--config "$CONFIG" --set exp_manager.exp_dir="$TMP/x" "${COMMON[@]}")
expect2 batch "model.train_batch_size=1000000 x model.max_context_width=64" "${X[@]}" \
  --set model.train_batch_size=1000000 --set model.max_context_width=64
expect2 batch-range "model.train_batch_size: 3000000 x model.max_context_width 32 must be <=" "${X[@]}" \
  --set model.train_batch_size=3000000
expect2 context "model.max_context_width must be <= 1048576, got 2147483648" "${X[@]}" \
  --set model.max_context_width=2147483648
expect2 vocab "model.vocab_size must be <= 2147483647, got 4294967296" "${X[@]}" --set model.vocab_size=4294967296
expect2 layers "model.num_hidden_layers must be <= 4096, got 100000" "${X[@]}" --set model.num_hidden_layers=100000
expect2 layers-plan "model.num_hidden_layers=4000" "${X[@]}" --set model.num_hidden_layers=4000 \
  --set model.hidden_size=4096 --set model.num_attention_heads=32 --set model.num_key_value_heads=8 \
  --set model.intermediate_size=14336
expect2 shape-8b "model.shape=8b" "${X[@]}" --set model.shape=8b

# YAML: a complex key; an alias bomb (9 levels of 9: 387 million values);
# an interpolation bomb (10 levels of 10 references: 10^10 bytes).
cp "$CONFIG" "$TMP/complex.yaml"
printf '? [a, b]\n: 1\n' >> "$TMP/complex.yaml"
expect2 complex-key "a map key must be a plain name, got a list" --config "$TMP/complex.yaml" \
  --set exp_manager.exp_dir="$TMP/x" "${COMMON[@]}"
python3 - "$CONFIG" "$TMP/aliases.yaml" "$TMP/interp.yaml" <<'PY'
import sys
base = open(sys.argv[1]).read()
lines = ['bomb:', '  l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
for i in range(1, 9):
    lines.append(f'  l{i}: &l{i} [' + ", ".join([f"*l{i-1}"] * 9) + ']')
open(sys.argv[2], "w").write(base + "\n".join(lines) + "\n")
lines = ['bomb:', '  s0: "xxxxxxxxxx"']
for i in range(1, 11):
    lines.append(f'  s{i}: "' + "".join(["${.s%d}" % (i - 1)] * 10) + '"')
text = "\n".join(lines) + "\n"
assert len(text) < 800, len(text)
open(sys.argv[3], "w").write(base + text)
PY
expect2 alias-bomb "the config holds more than 100000 values with its YAML aliases expanded" \
  --config "$TMP/aliases.yaml" --set exp_manager.exp_dir="$TMP/x" "${COMMON[@]}"
grep -q "bomb.l" "$TMP/alias-bomb.log" || fail "the alias bomb's message does not name the key"
expect2 interpolation-bomb "bytes (an interpolation bomb?)" --config "$TMP/interp.yaml" \
  --set exp_manager.exp_dir="$TMP/x" "${COMMON[@]}"
grep -q "bomb.s" "$TMP/interpolation-bomb.log" || fail "the interpolation bomb's message does not name the key"
echo "limits_test: $passed passed"
