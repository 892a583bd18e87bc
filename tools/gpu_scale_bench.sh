#!/usr/bin/env bash
# Scale benchmarks of issue 34 on a 4-GPU machine, from the repo root after
# tools/gpu_bundle.sh //runtime/cmd:hypertrain (carry .gpu-pack):
#   bash tools/gpu_scale_bench.sh MODE...
# Modes (each prints its own lines; run several in one call, anchors included):
#   startup1b   time from `train` start to step 1, 1b on one GPU (cold process)
#   hsdp        tokens/s per GPU: 1b 4x2048 on 1 GPU, HSDP 2x2, full_shard 1x4; 125m 16x2048 1 GPU and 2x2
#   sweep       1b 2x2 / 1x4 variants: hybrid_shard_zero2 (params kept from forward to backward), bf16 reduce,
#               shard_grad_op
#   8b          8b full_shard 1x4, seq 8192, batch 1, selective and full checkpointing:
#               tokens/s/GPU, MFU, peak memory, time to first step
#   anchor8b    PyTorch FSDP2 (runtime/bench/pytorch_fsdp2_anchor.py) for the same 8b shapes
#   anchor1b    PyTorch FSDP2 for 1b: 1 GPU and 2x2
#   resume8b    8b full_shard 1x4 saves at step 4, a rank is killed, the launcher restarts the gang:
#               checkpoint load rate and time from the death to the first step after resume
#   resume1b    the same for 1b full_shard 1x2 (a 2-GPU machine)
#   embgrad2    2 GPUs: the split and the whole-unit embedding gradient paths, loss per step
#   crossnode   2x2 with NCCL seeing two hosts (NCCL_HOSTID per node, sockets over loopback):
#               hybrid_shard and full_shard tokens/s/GPU (docs/DISTRIBUTED.md "Cross-node path")
# Every run's figures come from the trainer's own metrics.jsonl and log ("time to first step",
# "startup:" phase lines); peak memory from nvidia-smi sampled every 200 ms.
set -u
R=$(pwd); export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ -d .gpu ] || tar -xJf .gpu-pack/bundle.tar.xz
G=$R/.gpu
. tools/gpu_cuda_libs.sh
export LD_LIBRARY_PATH=$G/lib:$CUDA_LIB_DIRS
B=${SCALE_BIN:-$G/bin/hypertrain}
W=${SCALE_RUN_DIR:-/tmp/scale}
mkdir -p "$W"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader

SMI=$W/smi
watch_mem() { nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 200 > $SMI 2>/dev/null & SMI_PID=$!; }
peak_mem() { kill $SMI_PID 2>/dev/null; wait $SMI_PID 2>/dev/null
  awk -F', *' '{ if ($2 > m[$1]) m[$1] = $2 } END { s = "  peak MiB per GPU:"; for (g in m) s = s " gpu" g "=" m[g]; print s }' $SMI; }
# Last logged window of a run: tokens/s per device, MFU.
last() { tail -1 "$1/metrics.jsonl" 2>/dev/null | python3 -c '
import json, sys
for l in sys.stdin:
    m = json.loads(l)
    print("  step %s: %.0f tok/s/GPU, MFU %.1f%%, loss %.4f" % (m.get("step"), m.get("tokens_per_s_per_device", 0),
          100 * m.get("mfu", 0), m.get("loss", 0)))'; }
startup_lines() { grep -hE "time to first step|start-up:" "$@" 2>/dev/null | sed 's/^/  /' | head -40; }

# one NAME ARGS...: one process on GPU 0; wall time to the first metrics line as a cross-check.
one() {
  local n=$1; shift; rm -rf "$W/$n" "$W/$n.log"
  watch_mem; local t0=$(date +%s.%N)
  CUDA_VISIBLE_DEVICES=0 timeout 400 $B train "$@" --set exp_manager.exp_dir=$W/$n \
    --set exp_manager.checkpoint_dir=$W/$n/ck > $W/$n.log 2>&1
  echo "  exit $? after $(python3 -c "import time; print(round(time.time() - $t0, 1))") s"
  peak_mem; startup_lines $W/$n.log; last $W/$n
}
# gang NAME NODES PER_NODE ARGS...: NODES launchers of PER_NODE ranks, one GPU each.
gang() {
  local n=$1 nn=$2 pn=$3; shift 3; local p=$((21000 + RANDOM % 9000))
  rm -rf "$W/$n" "$W/$n".*.log
  watch_mem; local t0=$(date +%s.%N)
  for node in $(seq 0 $((nn - 1))); do
    CUDA_VISIBLE_DEVICES=$(seq -s, $((pn*node)) $((pn*node + pn - 1))) MASTER_ADDR=127.0.0.1 MASTER_PORT=$p \
      NNODES=$nn NODE_RANK=$node HYPERTRAIN_JOB_NAME=$n HT_GLOO_HOSTNAME=127.0.0.1 ${GANG_ENV:-} \
      ${GANG_HOSTIDS:+NCCL_HOSTID=hypertrain-node-$node} \
      timeout ${GANG_TIMEOUT:-500} $B launch --nproc-per-node $pn -- train "$@" --set exp_manager.exp_dir=$W/$n \
      --set exp_manager.checkpoint_dir=$W/$n/ck > $W/$n.$node.log 2>&1 &
  done
  wait $(jobs -p | grep -v "^$SMI_PID\$")
  echo "  done after $(python3 -c "import time; print(round(time.time() - $t0, 1))") s"
  peak_mem; startup_lines $W/$n.0.log; last $W/$n
  grep -h "\] hsdp: " $W/$n.*.log | head -2 | sed 's/^/  /'
  grep -hiE "error|fatal" $W/$n.*.log | head -3 | sed 's/^/  /'
}
anchor() { # torchrun args... (runtime/bench/pytorch_fsdp2_anchor.py)
  local n=$1; shift
  python3 -m torch.distributed.run --standalone --nproc-per-node $n runtime/bench/pytorch_fsdp2_anchor.py "$@" 2>&1 \
    | grep -E "^pytorch|Error|error:" | head -5
}

# resume NAME GPUS ARGS...: the operator's gang restart, by hand: save at step 4 (local disk), SIGKILL
# rank 1 after step 6, the launcher ends the gang, the script starts it again at once (no pod
# scheduling) and it resumes from step 4. Recovery = from the kill to the first step after the resume
# (step 5); the trainer's own phases are in <exp_dir>/recovery.json.
resume() {
  local n=$1 g=$2; shift 2
  local args=("$@" --set exp_manager.every_n_train_steps=4 --set trainer.max_steps=8 --set trainer.log_every_n_steps=1
              --set exp_manager.exp_dir=$W/$n --set exp_manager.checkpoint_dir=$W/$n/ck)
  rm -rf "$W/$n" "$W/$n".*.log; local p=$((21000 + RANDOM % 9000))
  local env=(CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((g - 1))) NNODES=1 NODE_RANK=0 MASTER_ADDR=127.0.0.1
             HYPERTRAIN_JOB_NAME=$n HT_GLOO_HOSTNAME=127.0.0.1)
  env "${env[@]}" MASTER_PORT=$p timeout 500 $B launch --nproc-per-node $g -- train "${args[@]}" > $W/$n.a.log 2>&1 &
  local lpid=$! victim="" c
  # after step 6 and the step-4 checkpoint's commit (its write runs in the background)
  for _ in $(seq 1 4000); do
    grep -q "step 6/" $W/$n.a.log 2>/dev/null && grep -q "committed" $W/$n.a.log && break; sleep 0.1
  done
  for c in $(pgrep -P $lpid) $(pgrep -P "$(pgrep -P $lpid | tr '\n' ',' | sed 's/,$//')" 2>/dev/null); do
    tr '\0' '\n' < /proc/$c/environ 2>/dev/null | grep -qx "RANK=1" && victim=$c
  done
  local t_kill=$(date +%s.%N)
  [ -n "$victim" ] && kill -KILL $victim || echo "  no rank 1 found under the launcher $lpid"
  wait $lpid; echo "  first launcher exit $?"
  env "${env[@]}" MASTER_PORT=$((p + 1)) RESTART_ATTEMPT=1 timeout 500 $B launch --nproc-per-node $g -- train \
    "${args[@]}" > $W/$n.b.log 2>&1 &
  lpid=$!
  for _ in $(seq 1 6000); do grep -q "step 5/" $W/$n.b.log 2>/dev/null && break; sleep 0.1; done
  echo "  recovery (kill -> first step after resume, no pod scheduling): $(python3 -c "import time; print(round(time.time() - $t_kill, 1))") s"
  wait $lpid; echo "  second launcher exit $?"
  startup_lines $W/$n.b.log
  grep -hiE "load|resum|GB/s" $W/$n.b.log | head -12 | sed 's/^/  /'
  echo "  recovery.json: $(cat $W/$n/recovery.json 2>/dev/null)"
  du -sh $W/$n/ck 2>/dev/null | sed 's/^/  checkpoints: /'; rm -rf "$W/$n/ck"
}

M1B=(--config examples/llama3-1b-gpu.yaml --set model.shape=1b --set model.train_batch_size=4 --set trainer.log_every_n_steps=5)
M8B=(--config examples/llama3-1b-gpu.yaml --set model.shape=8b --set model.tie_word_embeddings=false
     --set model.max_context_width=8192 --set model.train_batch_size=1 --set model.sharding_strategy=full_shard
     --set model.shard_degree=0 --set trainer.log_every_n_steps=2)
for mode in "$@"; do
  echo "== $mode"
  case $mode in
    startup1b)
      echo "- 1b, 1 GPU, cold (no tune cache)"
      one st1b "${M1B[@]}" --set trainer.max_steps=2 --set trainer.log_every_n_steps=1
      echo "- 1b, 1 GPU, the first run's tune_cache.json in a fresh exp_dir"
      rm -rf $W/st1c; mkdir -p $W/st1c; cp $W/st1b/tune_cache.json $W/st1c/ 2>/dev/null || echo "  (no tune_cache.json)"
      CUDA_VISIBLE_DEVICES=0 timeout 300 $B train "${M1B[@]}" --set trainer.max_steps=2 --set trainer.log_every_n_steps=1 \
        --set exp_manager.exp_dir=$W/st1c --set exp_manager.checkpoint_dir=$W/st1c/ck > $W/st1c.log 2>&1
      startup_lines $W/st1c.log ;;
    hsdp)
      echo "- 1b 1 GPU"; one h1 "${M1B[@]}" --set trainer.max_steps=30
      echo "- 1b HSDP 2x2"; gang h22 2 2 "${M1B[@]}" --set trainer.max_steps=30 --set model.sharding_strategy=hybrid_shard
      echo "- 1b full_shard 1x4"; gang h14 1 4 "${M1B[@]}" --set trainer.max_steps=30 --set model.sharding_strategy=full_shard
      M125=(--config examples/llama3-1b-gpu.yaml --set model.shape=125m --set model.train_batch_size=16 --set trainer.max_steps=30 --set trainer.log_every_n_steps=5)
      echo "- 125m 1 GPU"; one s1 "${M125[@]}"
      echo "- 125m HSDP 2x2"; gang s22 2 2 "${M125[@]}" --set model.sharding_strategy=hybrid_shard ;;
    sweep)  # 1b 2x2 variants against the default hybrid_shard (same call)
      for v in "model.sharding_strategy=hybrid_shard_zero2" "distributed.reduce_dtype=bf16"; do
        echo "- 1b 2x2 hybrid_shard --set $v"
        gang w22 2 2 "${M1B[@]}" --set trainer.max_steps=30 --set model.sharding_strategy=hybrid_shard --set $v
      done
      echo "- 1b full_shard 1x4 --set model.sharding_strategy=shard_grad_op"
      gang w14 1 4 "${M1B[@]}" --set trainer.max_steps=30 --set model.sharding_strategy=shard_grad_op ;;
    8b)
      for ac in selective full; do
        echo "- 8b full_shard 1x4 $ac"; gang e14$ac 1 4 "${M8B[@]}" --set trainer.max_steps=10 --set model.activation_checkpointing=$ac
      done ;;
    anchor8b)
      for ac in selective full; do anchor 4 --model 8b --seq 8192 --batch 1 --ac $ac --steps 6 --warmup 3; done ;;
    anchor1b)
      anchor 1 --model 1b --batch 4 --steps 15; anchor 4 --model 1b --batch 4 --mesh 2x2 --steps 15 ;;
    resume8b) resume r14 4 "${M8B[@]}" --set model.activation_checkpointing=selective ;;
    resume1b) resume r12 2 "${M1B[@]}" --set model.sharding_strategy=full_shard --set model.shard_degree=0 ;;
    embgrad2)
      # The embedding gradient's two NCCL paths on 2 GPUs, 125m full_shard 1x2 with 2x2048 tokens per rank:
      # the split gather (the default while shard degree x tokens <= vocabulary rows) and the whole unit
      # reduce-scattered (distributed.split_embedding_grad=false, the path beyond that bound). Same seed,
      # same data: the losses agree to the reduction order's rounding.
      E2=(--config examples/llama3-1b-gpu.yaml --set model.shape=125m --set model.train_batch_size=2
          --set model.sharding_strategy=full_shard --set model.shard_degree=0 --set trainer.max_steps=20
          --set trainer.log_every_n_steps=1 --set exp_manager.every_n_train_steps=1000)
      gang eg_split 1 2 "${E2[@]}"
      gang eg_whole 1 2 "${E2[@]}" --set distributed.split_embedding_grad=false
      python3 - "$W/eg_split/metrics.jsonl" "$W/eg_whole/metrics.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"loss"' in l] for f in sys.argv[1:3])
worst = 0.0
for x, y in zip(a, b):
    d = abs(x["loss"] - y["loss"]) / abs(x["loss"]); worst = max(worst, d)
    print("  step %3d  split %.6f  whole %.6f  rel diff %.2e" % (x["step"], x["loss"], y["loss"], d))
print("  embedding grad paths, %d steps: worst relative loss difference %.2e -> %s" % (
    min(len(a), len(b)), worst, "AGREE" if len(a) == len(b) == 20 and worst < 2e-3 else "DIFFER"))
PY
      ;;
    crossnode)
      # Each launcher is its own "host" to NCCL (NCCL_HOSTID), so no shared memory or P2P between them:
      # the replica (cross-node) traffic goes through NCCL's socket transport on loopback.
      for st in hybrid_shard full_shard; do
        echo "- 1b 2x2, two NCCL hosts, $st"
        GANG_ENV="NCCL_SOCKET_IFNAME=lo NCCL_NET=Socket NCCL_IB_DISABLE=1" GANG_HOSTIDS=1 \
          gang x$st 2 2 "${M1B[@]}" --set trainer.max_steps=20 --set model.sharding_strategy=$st \
          --set trainer.profile.dir=$W/x$st.trace --set trainer.profile.start_step=14 --set trainer.profile.num_steps=2
      done ;;
    *) echo "unknown mode $mode"; exit 2 ;;
  esac
done
