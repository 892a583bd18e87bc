#!/usr/bin/env bash
# GPU step trace of `1b` on one GPU (issue 24; docs/TRAINER.md "Step traces",
# docs/PERF.md "Trace overhead"). Runs examples/llama3-1b-gpu.yaml on the CUDA
# backend (synthetic data, 4x2048, 30 steps) three times: without a trace, with
# trainer.profile tracing steps 21..25, and without again; prints the median
# step time of steps 21..25 of each run (the overhead of tracing), checks and
# merges the trace, prints its per-rank summary and renders step 23 as an SVG
# timeline (tools/trace_svg.py) for the docs.
#
# Here:        tools/gpu_bundle.sh //runtime/cmd:hypertrain      (-> .gpu-pack/bundle.tar.xz)
# GPU machine: tools/gpu_trace_1b.sh          (repo root; writes to $OUT, else /tmp/gpu-trace)
# Output: $OUT/trace-1b/{trace-rank0.json.gz,merged.json.gz}, $OUT/trace-1b-gpu.svg,
#         $OUT/trace-1b.txt (what is printed).
set -u
R=$(pwd)
DEST=${OUT:-/tmp/gpu-trace}
mkdir -p "$DEST"
exec > >(tee "$DEST/trace-1b.txt") 2>&1
[ -d .gpu ] || tar -xJf .gpu-pack/bundle.tar.xz
. tools/gpu_cuda_libs.sh
export LD_LIBRARY_PATH=$R/.gpu/lib:$CUDA_LIB_DIRS
H=$R/.gpu/bin/hypertrain
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
S=(--config examples/llama3-1b-gpu.yaml --set trainer.backend=cuda --set trainer.devices=1
   --set trainer.max_steps=30 --set trainer.log_every_n_steps=1 --set model.data.use_synthetic_data=true
   --set exp_manager.every_n_train_steps=0)
run() {  # name, extra flags
  local name=$1; shift
  rm -rf "/tmp/trace-1b-$name"
  # Own checkpoint dir: a leftover final checkpoint would be resumed.
  CUDA_VISIBLE_DEVICES=0 timeout 400 "$H" train "${S[@]}" --set exp_manager.exp_dir="/tmp/trace-1b-$name" \
    --set exp_manager.checkpoint_dir="/tmp/trace-1b-$name/ck" "$@" \
    > "/tmp/trace-1b-$name.log" 2>&1 || { tail -30 "/tmp/trace-1b-$name.log"; echo "FAIL: run $name"; exit 1; }
}
run plain1
run traced --set trainer.profile.start_step=20 --set trainer.profile.num_steps=5
run plain2
grep -h "trace:" /tmp/trace-1b-traced.log

python3 - <<'PY'
import json, statistics
def steps(name):
    out = {}
    for line in open(f"/tmp/trace-1b-{name}/metrics.jsonl"):
        m = json.loads(line)
        out[m["step"]] = m
    return out
runs = {n: steps(n) for n in ("plain1", "traced", "plain2")}
def med(run, lo, hi, key="step_time_s"):
    return statistics.median(runs[run][s][key] for s in range(lo, hi + 1))
w = {n: med(n, 21, 25) for n in runs}
base = (w["plain1"] + w["plain2"]) / 2
print("median step time of steps 21..25 (traced in 'traced'):")
for n in runs:
    print(f"  {n:7s} {w[n]*1000:8.2f} ms  {med(n, 21, 25, 'tokens_per_s'):10.0f} tokens/s  MFU {med(n, 21, 25, 'mfu'):.3f}")
print(f"tracing overhead: {100 * (w['traced'] / base - 1):+.2f}% of a step "
      f"(untraced steps 11..20 of the same run: {med('traced', 11, 20)*1000:.2f} ms; "
      f"plain runs differ by {100 * abs(w['plain1'] / w['plain2'] - 1):.2f}%)")
PY

T=/tmp/trace-1b-traced/traces
"$H" trace check "$T"/trace-rank0.json.gz || { echo "FAIL: trace check"; exit 1; }
"$H" trace merge -o "$T/merged.json.gz" "$T" || { echo "FAIL: trace merge"; exit 1; }
python3 - "$T/merged.json.gz" <<'PY'
import collections, gzip, json, sys
ev = json.load(gzip.open(sys.argv[1]))["traceEvents"]
tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
count = collections.Counter(tracks[(e["pid"], e["tid"])] for e in ev if e["ph"] == "X")
print("spans per track:", dict(count))
ops = collections.defaultdict(float)
for e in ev:
    if e["ph"] == "X" and tracks[(e["pid"], e["tid"])].startswith("cuda stream"):
        ops[e["name"]] += e["dur"]
total = sum(ops.values())
if total:
    print("device time by op over the traced steps:",
          ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])))
for need in ("host", "cuda stream", "cuda phases"):
    assert any(n.startswith(need) for n in tracks.values()), f"no '{need}' track"
PY
[ $? -eq 0 ] || { echo "FAIL: merged trace"; exit 1; }
mkdir -p "$DEST/trace-1b"
cp "$T"/trace-rank0.json.gz "$T"/merged.json.gz "$DEST/trace-1b/"
python3 tools/trace_svg.py "$T/merged.json.gz" -o "$DEST/trace-1b-gpu.svg" --from-step 23 --steps 1 \
  --title "hypertrain 1b, one $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), bf16 4x2048: step 23" \
  || { echo "FAIL: svg"; exit 1; }
echo "PASS: 1b GPU trace in $DEST"
