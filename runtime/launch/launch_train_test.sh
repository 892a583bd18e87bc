#!/usr/bin/env bash
# End to end through the real binary: `hypertrain launch` on 2 "nodes" x 2
# ranks (4 processes, Gloo on 127.0.0.1) trains the tiny model and its loss /
# grad-norm trajectory matches `hypertrain train` in one process on the same
# global batch (the single process accumulates 4 micro-batches where each of
# the 4 ranks reads one), with the split embedding gradient and without it. Then a rank killed with SIGKILL mid-run makes both
# launchers exit non-zero within the grace period, leaving no process behind.
#
# GPU (NCCL) variant, on a machine with 4 GPUs (2 "nodes" x 2, one GPU each):
#   bazel test //runtime/launch:launch_train_test --test_env=LAUNCH_TRAIN_BACKEND=cuda
# Node 0 sees GPUs 0,1 and node 1 GPUs 2,3 (CUDA_VISIBLE_DEVICES); the single
# process runs on GPU 0. LOSS_RTOL / NORM_RTOL override the tolerances. The
# CUDA flash-attention kernel needs head_dim 64 or 128, so the tiny shape runs
# with 2 heads of 64 (1 KV head) there.
# From the GPU bundle (tools/gpu_bundle.sh), in the repo root:
#   LAUNCH_TRAIN_BACKEND=cuda HYPERTRAIN_BIN=.gpu/bin/hypertrain \
#     LD_LIBRARY_PATH=.gpu/lib:... bash runtime/launch/launch_train_test.sh
set -euo pipefail
BACKEND="${LAUNCH_TRAIN_BACKEND:-cpu}"
# CPU computes in fp32: only the summation order differs (measured ~1e-7). On
# CUDA the compute copy is bf16, so an fp32 ulp of difference in a master weight
# can flip a bf16 rounding; measured on 4 H200s: 1.5e-5 at step 4 (full_shard).
if [ "$BACKEND" = cuda ]; then default_loss_rtol=5e-5; else default_loss_rtol=1e-5; fi
LOSS_RTOL="${LOSS_RTOL:-$default_loss_rtol}"
NORM_RTOL="${NORM_RTOL:-1e-4}"
export NCCL_NVLS_ENABLE=0

BIN="${HYPERTRAIN_BIN:-$PWD/runtime/cmd/hypertrain}"
case "$BIN" in /*) ;; *) BIN="$PWD/$BIN" ;; esac
[ -x "$BIN" ] || { echo "FAIL: no hypertrain binary at $BIN" >&2; exit 1; }
CONFIG="$PWD/examples/tiny-cpu.yaml"
TMP="$(mktemp -d "${TEST_TMPDIR:-/tmp}/launch_train.XXXXXX")"
fail() { echo "FAIL: $*" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1

inputs=(/usr/share/common-licenses/*)
if [ ! -e "${inputs[0]}" ]; then
  for i in $(seq 1 3000); do echo "line $i: the quick brown fox jumps over the lazy dog"; done > "$TMP/gen.txt"
  inputs=("$TMP/gen.txt")
fi
"$BIN" prepare --out "$TMP/data" --tokens-per-shard 100000 "${inputs[@]}" 2> "$TMP/prepare.log"

COMMON=(--config "$CONFIG" --set model.data.train_dir="$TMP/data" --set trainer.log_every_n_steps=1
        --set model.train_batch_size=2 --set model.max_context_width=32 --set model.num_hidden_layers=2
        --set model.activation_checkpointing=none --set trainer.backend=$BACKEND)
if [ "$BACKEND" = cuda ]; then
  COMMON+=(--set model.num_attention_heads=2 --set model.num_key_value_heads=1)
fi
gpus_of_node() { [ "$BACKEND" = cuda ] && echo "CUDA_VISIBLE_DEVICES=$((2 * $1)),$((2 * $1 + 1))" || echo "HT_UNUSED=1"; }

# Fields "step loss grad_norm" of every metrics line.
trajectory() { sed 's/.*"grad_norm":\([^,]*\),"loss":\([^,]*\),.*"step":\([0-9]*\),.*/\3 \2 \1/' "$1"; }

env $(gpus_of_node 0) "$BIN" train "${COMMON[@]}" --set trainer.max_steps=4 --set model.grad_accumulation_steps=4 \
  --set exp_manager.exp_dir="$TMP/single" > "$TMP/single.log" 2>&1 || { cat "$TMP/single.log"; fail "single process run"; }
trajectory "$TMP/single/metrics.jsonl" > "$TMP/single.traj"

port() { echo $((20000 + (RANDOM % 20000))); }

# Starts both nodes' launchers in the background; $1 = exp dir, rest = extra
# args of train; LAUNCH_FLAGS go before `launch` (hypertrain's global flags).
LAUNCH_FLAGS=()
start_nodes() {
  local exp="$1"; shift
  local p; p=$(port)
  for node in 0 1; do
    env $(gpus_of_node $node) MASTER_ADDR=127.0.0.1 MASTER_PORT=$p NNODES=2 NODE_RANK=$node HYPERTRAIN_JOB_NAME=e2e HT_GLOO_HOSTNAME=127.0.0.1 \
      HT_RENDEZVOUS_TIMEOUT_S=60 \
      "$BIN" "${LAUNCH_FLAGS[@]}" launch --nproc-per-node 2 --grace-period-s 2 -- train "${COMMON[@]}" \
      --set exp_manager.exp_dir="$exp" "$@" > "$exp.node$node.log" 2>&1 &
    eval "LAUNCHER$node=$!"
  done
}

# hybrid_shard:whole = the embedding unit's gradient reduce-scattered whole
# (HT_SPLIT_EMBEDDING_GRAD=0) instead of split (docs/DISTRIBUTED.md).
for run in hybrid_shard full_shard no_shard hybrid_shard:whole; do
  strategy="${run%%:*}"
  exp="$TMP/dist_${run/:/_}"
  want_embedding=split
  [ "$strategy" = no_shard ] && want_embedding=whole
  if [ "$run" != "$strategy" ]; then export HT_SPLIT_EMBEDDING_GRAD=0; want_embedding=whole; fi
  start_nodes "$exp" --set trainer.max_steps=4 --set model.grad_accumulation_steps=1 \
    --set model.sharding_strategy=$strategy
  unset HT_SPLIT_EMBEDDING_GRAD
  rc0=0; rc1=0
  wait "$LAUNCHER0" || rc0=$?
  wait "$LAUNCHER1" || rc1=$?
  if [ $rc0 -ne 0 ] || [ $rc1 -ne 0 ]; then
    cat "$exp.node0.log" "$exp.node1.log"; fail "$strategy: launchers exited $rc0 / $rc1"
  fi
  grep -q "$strategy, shard group" "$exp.node0.log" || fail "$strategy: no group line"
  grep -h "\] hsdp: \|\] CUDA device" "$exp.node0.log" | head -4 || true
  grep -q "\] hsdp: .*embedding gradient $want_embedding" "$exp.node0.log" ||
    fail "$run: expected the embedding gradient $want_embedding in the hsdp line"
  trajectory "$exp/metrics.jsonl" > "$exp.traj"
  echo "== $run: step loss grad_norm (single | distributed)"
  paste "$TMP/single.traj" "$exp.traj"
  # Same steps; loss within LOSS_RTOL relative, grad norm within NORM_RTOL.
  paste "$TMP/single.traj" "$exp.traj" | awk -v s=$run -v lt="$LOSS_RTOL" -v nt="$NORM_RTOL" '
    function abs(x) { return x < 0 ? -x : x }
    { n++; if ($1 != $4) { print s ": step mismatch"; bad = 1 }
      if (abs($2 - $5) > lt * abs($2)) { print s ": loss differs at step " $1; bad = 1 }
      if (abs($3 - $6) > nt * abs($3)) { print s ": grad norm differs at step " $1; bad = 1 } }
    END { if (n != 4) { print s ": expected 4 steps, got " n; bad = 1 } exit bad }' || fail "$run trajectory"
done

# The same job with torchrun's (HyperPod's hyperpodrun's) agent in place of
# `hypertrain launch` (examples/interop/hyperpod-pytorchjob.yaml): each rank
# gets the agent's worker variables (GROUP_RANK/GROUP_WORLD_SIZE, no NODE_RANK)
# and the agent's own store holds MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE),
# so hypertrain's store must take the next port; same trajectory.
exp="$TMP/torchrun_workers"
p=$(port)
python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8); time.sleep(600)' "$p" &
agent_store=$!
trap 'kill $agent_store 2>/dev/null || true' EXIT
workers=()
for node in 0 1; do
  for local in 0 1; do
    env $(gpus_of_node $node) MASTER_ADDR=127.0.0.1 MASTER_PORT=$p WORLD_SIZE=4 RANK=$((2 * node + local)) \
      LOCAL_RANK=$local LOCAL_WORLD_SIZE=2 GROUP_RANK=$node GROUP_WORLD_SIZE=2 ROLE_RANK=$((2 * node + local)) \
      TORCHELASTIC_RUN_ID=e2e TORCHELASTIC_USE_AGENT_STORE=True NNODES=2 NPROC_PER_NODE=2 \
      HYPERTRAIN_JOB_NAME=e2e HT_GLOO_HOSTNAME=127.0.0.1 HT_RENDEZVOUS_TIMEOUT_S=60 \
      "$BIN" train "${COMMON[@]}" --set exp_manager.exp_dir="$exp" --set trainer.max_steps=4 \
      --set model.grad_accumulation_steps=1 --set model.sharding_strategy=hybrid_shard \
      > "$exp.rank$((2 * node + local)).log" 2>&1 &
    workers+=($!)
  done
done
for w in "${workers[@]}"; do wait "$w" || { cat "$exp".rank*.log; fail "torchrun workers: a rank failed"; }; done
kill $agent_store 2>/dev/null || true
trajectory "$exp/metrics.jsonl" > "$exp.traj"
paste "$TMP/single.traj" "$exp.traj" | awk -v lt="$LOSS_RTOL" -v nt="$NORM_RTOL" '
  function abs(x) { return x < 0 ? -x : x }
  { n++; if ($1 != $4 || abs($2 - $5) > lt * abs($2) || abs($3 - $6) > nt * abs($3)) bad = 1 }
  END { exit bad || n != 4 }' || { paste "$TMP/single.traj" "$exp.traj"; fail "torchrun workers trajectory"; }
echo "== torchrun/hyperpodrun workers (GROUP_RANK, agent store on MASTER_PORT): same 4-step trajectory"

# A rank killed mid-run: both launchers exit non-zero within the grace period.
# Logged as JSON: the launcher passes its log flags on to the ranks.
exp="$TMP/killed"
LAUNCH_FLAGS=(--log-format=json --log-level=info)
# NCCL may block on a dead peer instead of failing: the watchdog (20 s) bounds it.
start_nodes "$exp" --set trainer.max_steps=100000 --set model.sharding_strategy=hybrid_shard \
  --set model.collective_timeout=20
for _ in $(seq 1 600); do
  grep -q "step 2/" "$exp.node0.log" 2>/dev/null && break
  sleep 0.1
done
grep -q "step 2/" "$exp.node0.log" || { cat "$exp.node0.log" "$exp.node1.log"; fail "training did not start"; }
ranks0=$(pgrep -P "$LAUNCHER0" || true)
ranks1=$(pgrep -P "$LAUNCHER1" || true)
[ "$(echo $ranks0 | wc -w)" -eq 2 ] && [ "$(echo $ranks1 | wc -w)" -eq 2 ] || fail "expected 2 ranks per node: '$ranks0' '$ranks1'"
victim=$(echo $ranks1 | awk '{print $2}')
start=$(date +%s.%N)
kill -KILL "$victim"
rc0=0; rc1=0
wait "$LAUNCHER1" || rc1=$?
wait "$LAUNCHER0" || rc0=$?
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')  # no bc on GPU hosts
echo "killed rank pid $victim: node1 launcher exit $rc1, node0 launcher exit $rc0 after ${took}s"
grep -h '"node":"[01]"' "$exp.node1.log" "$exp.node0.log" | tail -12 || true
python3 - "$exp.node0.log" <<'PY' || fail "JSON logs"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ranks = {l.get("rank") for l in lines if "rank" in l}
assert {"0", "1"} <= ranks, f"ranks in the JSON lines: {ranks}"
assert any(l.get("node") == "0" and "started 2 ranks" in l["msg"] for l in lines), "no launcher line"
assert any("step 2/" in l["msg"] and l["level"] == "info" for l in lines), "no step line"
print(f"{len(lines)} JSON log lines from node 0's launcher and ranks {sorted(ranks)}")
PY
[ $rc1 -eq 137 ] || fail "node 1 launcher should exit with the killed rank's code 137, got $rc1"
[ $rc0 -ne 0 ] || fail "node 0 launcher should fail too"
limit=15; [ "$BACKEND" = cuda ] && limit=40
awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t < l) }' || fail "launchers took ${took}s"
for pid in $ranks0 $ranks1; do
  if [ -e /proc/$pid ] && ! grep -q '^State:.*Z' /proc/$pid/status 2>/dev/null; then fail "rank pid $pid still alive"; fi
done
echo "1 passed, 0 failed"
