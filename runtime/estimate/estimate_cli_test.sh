#!/usr/bin/env bash
# The real `hypertrain estimate`: a recipe-shaped config (YAML 1.1 booleans,
# keys hypertrain cannot honour), text and JSON output, fit verdicts, and exit
# codes for bad input.
set -euo pipefail

BIN="$PWD/runtime/cmd/hypertrain"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$TMP/recipe.yaml" <<'YAML'
trainer: {devices: 8, num_nodes: 1, precision: bf16, max_steps: 50}
model:
  train_batch_size: 2
  activation_checkpointing: False
  sharding_strategy: hybrid_shard
  shard_degree: 8
  fp8: True
  max_context_width: 8192
  num_hidden_layers: 16
  hidden_size: 2048
  num_attention_heads: 32
  intermediate_size: 8192
  vocab_size: 128256
  num_key_value_heads: 8
  tie_word_embeddings: true
  data: {train_dir: null, use_synthetic_data: False}
exp_manager: {exp_dir: /fsx/exp, checkpoint_dir: '${recipes.exp_manager.exp_dir}/checkpoints/'}
YAML

"$BIN" --help | grep -q "estimate" || fail "usage lists estimate"
"$BIN" estimate --help | grep -q -- "--instance-type" || fail "estimate --help"

out=$("$BIN" estimate --config "$TMP/recipe.yaml" --instance-type ml.p5.48xlarge --tokens 1T)
echo "$out"
for want in "1,235,814,400" "hybrid_shard\*" "fits: " "H100 80GB (ml.p5.48xlarge)" "GPU-hours" \
            "model.fp8" "131,072 tokens/step"; do
  grep -q -- "$want" <<< "$out" || fail "missing '$want'"
done

# The same on a 24 GB A10G does not fit; the report says what would.
out=$("$BIN" estimate --config "$TMP/recipe.yaml" --instance-type ml.g5.48xlarge --set model.sharding_strategy=no_shard --set model.shard_degree=0)
grep -q "DOES NOT FIT" <<< "$out" || fail "no_shard 1b at 2x8192 should not fit an A10G"
grep -q -- "--set model.activation_checkpointing=" <<< "$out" || fail "no alternative offered"

# Without --instance-type: one fit line per GPU model of the instance table
# (contract/instance_types.cc), each model once.
fits=$("$BIN" estimate --config "$TMP/recipe.yaml" | grep '^fit ' | sed 's/^fit \(.*\) (ml\..*/\1/')
for gpu in "A10G 24GB" "L4 24GB" "L40S 48GB" "A100 40GB" "A100 80GB" "H100 80GB" "H200 141GB" "B200 179GB"; do
  echo "$fits" | grep -qx "$gpu" || fail "no fit line for $gpu: $fits"
done
[ -z "$(echo "$fits" | sort | uniq -d)" ] || fail "a GPU model twice: $fits"

# JSON: the same numbers, machine-readable.
"$BIN" estimate --config "$TMP/recipe.yaml" --nodes 2 --instance-type ml.p5.48xlarge --tokens 300B --json > "$TMP/e.json"
python3 - "$TMP/e.json" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))
assert e["params"]["total"] == 1235814400, e["params"]
assert e["run"]["world"] == 16 and e["run"]["shardDegree"] == 8 and e["run"]["replicaDegree"] == 2, e["run"]
m = e["memoryPerRank"]
parts = ["weights", "master", "gradients", "optimizer", "unitPool", "activations", "workspace", "embeddingGather", "buffers"]
assert sum(m[p] for p in parts) == m["allocated"], m
assert m["inUse"] == m["allocated"] + m["transient"] + m["overhead"], m
assert e["fit"][0]["instanceType"] == "ml.p5.48xlarge" and e["fit"][0]["fits"], e["fit"]
b = e["budget"]
assert abs(b["seconds"] - 3e11 / e["speed"]["tokensPerSecond"]) < 1e-6 * b["seconds"], b
assert abs(b["gpuHours"] - b["seconds"] / 3600 * 16) < 1e-6 * b["gpuHours"], b
assert set(e["memoryByStrategy"]) == {"hybrid_shard", "hybrid_shard_zero2", "full_shard", "shard_grad_op", "no_shard"}
print("json ok")
PY

# Issue 40: the HyperPod recipes as written (no base_results_dir). The 8B
# recipe asks for tensor parallelism: an estimate with a note, not exit 2; it
# is Hugging Face's untied Llama-3.1-8B (8,030,261,248 parameters), with no
# note claiming tie_word_embeddings is unset. The cost is in dollars.
R="$PWD/examples/recipes"
for recipe in "$R"/*.yaml; do
  "$BIN" estimate --config "$recipe" > "$TMP/recipe_est.txt" 2>&1 || { cat "$TMP/recipe_est.txt"; fail "estimate $recipe: exit $?"; }
done
P8B="$R/hf_llama3_8b_seq8k_gpu_p5x16_pretrain.yaml"
out=$("$BIN" estimate --config "$P8B" --instance-type ml.p5.48xlarge --tokens 1T)
echo "$out"
for want in "untied LM head" "8,030,261,248" \
            "model.tensor_model_parallel_degree: 2: hypertrain does not do tensor parallelism: estimated with degree 1" \
            'cost      16 x ml.p5.48xlarge at $98.32/h = $1,573/h; the budget: $' \
            "price: EC2 On-Demand Linux, us-east-1, 2024 list price"; do
  grep -qF -- "$want" <<< "$out" || fail "8b recipe: missing '$want'"
done
grep -q "tie_word_embeddings is not set" <<< "$out" && fail "the false tie_word_embeddings note is back"
# The budget in dollars is instance-hours x price.
python3 - "$out" <<'PY'
import re, sys
out = sys.argv[1]
gpu_hours = float(re.search(r"= ([0-9,]+) GPU-hours", out).group(1).replace(",", ""))
usd = float(re.search(r"the budget: \$([0-9,]+)", out).group(1).replace(",", ""))
want = gpu_hours / 8 * 98.32
assert abs(usd - want) <= 0.001 * want + 2, (usd, want)
print("cost ok:", usd)
PY
# A price file over the built-in table, and --price-per-hour over both.
printf 'source: "our reservation, 2026"\nprices: {ml.p5.48xlarge: 61.5, ml.p5en.48xlarge: 70}\n' > "$TMP/prices.yaml"
out=$("$BIN" estimate --config "$P8B" --instance-type ml.p5.48xlarge --prices "$TMP/prices.yaml")
grep -qF 'cost      16 x ml.p5.48xlarge at $61.50/h = $984.00/h' <<< "$out" || fail "--prices not applied: $out"
grep -qF "price: our reservation, 2026 ($TMP/prices.yaml)" <<< "$out" || fail "--prices source not shown"
out=$("$BIN" estimate --config "$P8B" --instance-type ml.p5en.48xlarge --prices "$TMP/prices.yaml" --price-per-hour 50 --json)
python3 - "$out" <<'PY'
import json, sys
c = json.loads(sys.argv[1])["cost"]
assert c == {"instanceType": "ml.p5en.48xlarge", "usdPerInstanceHour": 50.0, "instances": 16, "usdPerHour": 800.0,
             "priceSource": "--price-per-hour"}, c
PY
out=$("$BIN" estimate --config "$P8B" --instance-type ml.p6-b200.48xlarge)
grep -qF "cost: no price for ml.p6-b200.48xlarge in the price table; give --price-per-hour or --prices" <<< "$out" ||
  fail "no note for an instance without a price"

# Bad input: exit 2 and a message naming the flag or key.
expect_error() {  # expect_error "message" args...
  local msg=$1; shift
  set +e
  err=$("$BIN" estimate "$@" 2>&1 >/dev/null); rc=$?
  set -e
  [ $rc -eq 2 ] || fail "estimate $* exited $rc, want 2"
  grep -q -- "$msg" <<< "$err" || fail "estimate $*: '$err' does not say '$msg'"
}
expect_error "--config is required"
expect_error "unknown 'ml.p9.48xlarge'" --config "$TMP/recipe.yaml" --instance-type ml.p9.48xlarge
expect_error "--tokens" --config "$TMP/recipe.yaml" --tokens 12X
expect_error "--mfu" --config "$TMP/recipe.yaml" --mfu 45
expect_error "--nodes" --config "$TMP/recipe.yaml" --nodes 0
expect_error "model.shard_degree" --config "$TMP/recipe.yaml" --set model.shard_degree=3
expect_error "config error" --config "$TMP/missing.yaml"
expect_error "not expected: --frobnicate" --config "$TMP/recipe.yaml" --frobnicate
printf 'prices: {ml.p5.48xlarge: cheap}\n' > "$TMP/badprices.yaml"
expect_error "prices.ml.p5.48xlarge: expected a positive number of USD per instance-hour, got 'cheap'" \
  --config "$TMP/recipe.yaml" --instance-type ml.p5.48xlarge --prices "$TMP/badprices.yaml"
expect_error "--price-per-hour: expected a positive number" --config "$TMP/recipe.yaml" --instance-type ml.p5.48xlarge --price-per-hour -3
expect_error "--price-per-hour needs --instance-type" --config "$TMP/recipe.yaml" --price-per-hour 3
echo PASS
