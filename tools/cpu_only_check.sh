#!/usr/bin/env bash
# The CPU-only configuration end to end, with the CUDA toolkit hidden
# (CUDA_HOME=/nonexistent; issue 27). tools/test.sh runs it where a toolkit
# exists; without one the whole suite is CPU-only already. It
#  1. builds the local control plane, the node agent, the operator and
#     hypertrain as a machine without CUDA would (the rest of the CPU-only
#     build is the same actions as the CUDA build's, so they are not redone);
#  2. checks that hypertrain links no CUDA library, says "CPU backend only",
#     refuses trainer.backend: cuda with exit 2 naming how to get a CUDA build,
#     and trains under trainer.backend: auto on the CPU;
#  3. trains the tiny model, then resumes it from its checkpoint;
#  4. runs the local demo (tools/local-e2e.sh, shortened) on these binaries:
#     operator, node agent, 2 x 2 CPU ranks, a killed pod, gang restart and
#     the resume from the checkpoint to Succeeded.
# Prints one "cpu-only: <check> PASSED|FAILED" line per check, then
# "N passed, N failed". Exit 0 only when every check passed.
#   tools/cpu_only_check.sh [RESULTS_FILE]   (RESULTS_FILE: the check lines, for tools/test.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
RESULTS="${1:-}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cpu-only.XXXXXX")"
passed=0
failed=0
report() {  # report NAME STATUS [DETAIL]
  echo "cpu-only: $1 $2${3:+ ($3)}"
  [ -n "$RESULTS" ] && echo "cpu-only:$1 $2" >> "$RESULTS"
  if [ "$2" = PASSED ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ] && [ -z "${KEEP:-}" ] && rm -rf "$WORK"
  exit $((failed > 0))
}

# 1. The build, with no toolkit to be found.
TARGETS=(//localcluster/apiserver:kube-local //localcluster/nodeagent:node-agent
         //operator/cmd:hypertrain-operator //runtime/cmd:hypertrain)
if ! CUDA_HOME=/nonexistent bazel build "${TARGETS[@]}" > "$WORK/build.log" 2>&1; then
  tail -n 40 "$WORK/build.log"
  report build FAILED "bazel build with CUDA_HOME=/nonexistent"
  finish
fi
BB="$(CUDA_HOME=/nonexistent bazel info bazel-bin 2>/dev/null)"
BIN="$WORK/bin"
mkdir -p "$BIN"
# Copies: the next CUDA build writes the same output paths.
cp "$BB/localcluster/apiserver/kube-local" "$BB/localcluster/nodeagent/node-agent" \
   "$BB/operator/cmd/hypertrain-operator" "$BB/runtime/cmd/hypertrain" "$BIN/"
report build PASSED

# 2. No CUDA in it, and it says so.
HT="$BIN/hypertrain"
inputs=(/usr/share/common-licenses/*)
"$HT" prepare --out "$WORK/data" --tokens-per-shard 100000 "${inputs[@]}" > "$WORK/prepare.log" 2>&1
COMMON=(--config "$ROOT/examples/tiny-cpu.yaml" --set model.data.train_dir="$WORK/data"
        --set model.num_hidden_layers=2 --set model.max_context_width=32 --set trainer.log_every_n_steps=2)
if ldd "$HT" | grep -qiE 'libcuda|libcudart|libnccl|libcudnn|libcublas'; then
  report no-cuda-linked FAILED "$(ldd "$HT" | grep -iE 'cuda|nccl|cudnn|cublas' | tr '\n' ' ')"
elif ! "$HT" --help | grep -q "CPU backend only"; then
  report no-cuda-linked FAILED "--help does not say CPU backend only"
else
  report no-cuda-linked PASSED
fi
"$HT" train "${COMMON[@]}" --set trainer.backend=cuda --set exp_manager.exp_dir="$WORK/cuda" > "$WORK/cuda.log" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "the CUDA backend is not built in" "$WORK/cuda.log" &&
   grep -q "no CUDA toolkit at /nonexistent" "$WORK/cuda.log" && grep -q "CUDA_HOME" "$WORK/cuda.log"; then
  report backend-cuda-not-built-in PASSED
else
  cat "$WORK/cuda.log"
  report backend-cuda-not-built-in FAILED "exit $rc"
fi

# 3. CPU training (trainer.backend: auto picks the CPU) and its resume.
"$HT" train "${COMMON[@]}" --set trainer.backend=auto --set trainer.max_steps=6 \
  --set exp_manager.every_n_train_steps=3 --set exp_manager.exp_dir="$WORK/exp" > "$WORK/train1.log" 2>&1
rc1=$?
"$HT" train "${COMMON[@]}" --set trainer.backend=auto --set trainer.max_steps=10 \
  --set exp_manager.every_n_train_steps=3 --set exp_manager.exp_dir="$WORK/exp" > "$WORK/train2.log" 2>&1
rc2=$?
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && grep -q "backend cpu" "$WORK/train1.log" &&
   grep -q "resumed at step 6" "$WORK/train2.log" && grep -q "step 10/10" "$WORK/train2.log" &&
   [ -e "$WORK/exp/checkpoints/step-10/manifest.json" ]; then
  report train-and-resume PASSED
else
  tail -n 20 "$WORK/train1.log" "$WORK/train2.log"
  report train-and-resume FAILED "exits $rc1/$rc2"
fi

# 4. The local demo on the CPU-only binaries.
if HT_BIN_DIR="$BIN" HT_LOCAL_DIR="$WORK/local" HT_MAX_STEPS=40 HT_CKPT_EVERY=10 HT_KILL_AT_STEP=15 \
   HT_TIMEOUT_S=300 "$ROOT/tools/local-e2e.sh" > "$WORK/local-e2e.log" 2>&1 &&
   grep -q "attempt 2 resumed from the checkpoint of step" "$WORK/local-e2e.log"; then
  report local-demo PASSED
else
  tail -n 40 "$WORK/local-e2e.log"
  report local-demo FAILED "tools/local-e2e.sh; logs under $WORK/local"
fi
finish
