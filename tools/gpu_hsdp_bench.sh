#!/usr/bin/env bash
# Run on a 4-GPU machine from the repo root after tools/gpu_bundle.sh (carry .gpu-pack):
#   bash tools/gpu_hsdp_bench.sh [parity|bench|launch|all|hsdp1b [--set ...]]  (default parity + bench; each < 10 min)
# HSDP_NODES x HSDP_PER_NODE "nodes" x ranks (default 2 x 2; one GPU per rank):
# on a 2-GPU machine use HSDP_NODES=1 HSDP_PER_NODE=2 (shard 2) or 2 x 1 (replicate 2).
# launch: runtime/launch/launch_train_test.sh with the CUDA backend and NCCL from
# the bundle (2 nodes x 2 GPUs vs one GPU, then a killed rank).
# 4-GPU run: HSDP loss parity on 125m (2x2 vs 1 GPU accumulating 4 micro-batches;
# bf16, then fp16 with the dynamic loss scaler), then HSDP throughput for 125m
# and 1b as 2 nodes x 2 vs one GPU. For every run it prints the backend's
# planned bytes ("CUDA device N (...): planned" lines: state + activations + unit pool), the peak
# memory per GPU (nvidia-smi, sampled every 200 ms) and each rank's HSDP
# summary ("hsdp:" lines: collectives, host time blocked on them per step).
set -u
R=$(pwd); export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ -d .gpu ] || tar -xJf .gpu-pack/bundle.tar.xz
G=$R/.gpu
. tools/gpu_cuda_libs.sh
export LD_LIBRARY_PATH=$G/lib:$CUDA_LIB_DIRS
B=$G/bin/hypertrain
# Peak memory.used per GPU while "$@" runs.
SMI=/tmp/smi.$$
watch_mem() { nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 200 > $SMI 2>/dev/null & SMI_PID=$!; }
peak_mem() { kill $SMI_PID 2>/dev/null; wait $SMI_PID 2>/dev/null
  awk -F', *' '{ if ($2 > m[$1]) m[$1] = $2 } END { s = "peak MiB per GPU:"; for (g in m) s = s " gpu" g "=" m[g]; print s }' $SMI; }
traj() { sed 's/.*"grad_norm":\([^,]*\),"loss":\([^,]*\),.*"step":\([0-9]*\),.*/\3 \2 \1/' "$1"/metrics.jsonl; }
NN=${HSDP_NODES:-2}; PN=${HSDP_PER_NODE:-2}; W=$((NN * PN))
hsdp() { # $1 = name, rest = args
  local n=$1; shift; local p=$((21000 + RANDOM % 9000))
  rm -rf /tmp/$n /tmp/$n.*.log  # a leftover checkpoint would be resumed (and the run end at once)
  watch_mem
  for node in $(seq 0 $((NN - 1))); do
    CUDA_VISIBLE_DEVICES=$(seq -s, $((PN*node)) $((PN*node + PN - 1))) MASTER_ADDR=127.0.0.1 MASTER_PORT=$p NNODES=$NN NODE_RANK=$node HYPERTRAIN_JOB_NAME=$n HT_GLOO_HOSTNAME=127.0.0.1 \
      timeout 200 $B launch --nproc-per-node $PN -- train "$@" --set exp_manager.exp_dir=/tmp/$n --set exp_manager.checkpoint_dir=/tmp/$n/ck > /tmp/$n.$node.log 2>&1 &
  done
  wait $(jobs -p | grep -v "^$SMI_PID\$")
  peak_mem
  grep -h "\] CUDA device\|\] hsdp: " /tmp/$n.*.log
}
one() { # $1 = name, rest = args: one process on GPU 0
  local n=$1; shift
  rm -rf /tmp/$n /tmp/$n.log
  watch_mem
  CUDA_VISIBLE_DEVICES=0 timeout 150 $B train "$@" --set exp_manager.exp_dir=/tmp/$n --set exp_manager.checkpoint_dir=/tmp/$n/ck > /tmp/$n.log 2>&1
  peak_mem
  grep -h "\] CUDA device" /tmp/$n.log
}
MODE=${1:-all}
if [ "$MODE" = hsdp1b ]; then  # one 1b HSDP run; extra args after the mode go to train (for sweeps)
  shift; S=(--config examples/llama3-1b-gpu.yaml --set model.shape=1b --set model.train_batch_size=4 --set trainer.max_steps=20 --set trainer.log_every_n_steps=5)
  hsdp sweep_1b "${S[@]}" --set model.sharding_strategy=hybrid_shard "$@" | grep -E "peak|CUDA device 0: compute"
  tail -1 /tmp/sweep_1b/metrics.jsonl | sed 's/.*"tokens_per_s_per_device":\([0-9.]*\).*/tokens\/s\/GPU \1/'
  exit 0
fi
if [ "$MODE" = launch ]; then
  LAUNCH_TRAIN_BACKEND=cuda HYPERTRAIN_BIN=$B TEST_TMPDIR=/tmp bash runtime/launch/launch_train_test.sh
  exit $?
fi
if [ "$MODE" != bench ]; then
P=(--config examples/llama3-1b-gpu.yaml --set model.shape=125m --set model.train_batch_size=4 --set trainer.max_steps=6 --set trainer.log_every_n_steps=1 --set model.optim.sched.warmup_steps=2)
one par1 "${P[@]}" --set model.grad_accumulation_steps=$W
hsdp par4 "${P[@]}" --set model.sharding_strategy=hybrid_shard
echo "== parity 125m: step loss grad_norm | 1 GPU x$W micro-batches vs HSDP ${NN}x$PN (bf16)"; paste <(traj /tmp/par1) <(traj /tmp/par4)
# 2 micro-batches per rank: the pooled gradients are reduce-scattered every
# micro-batch and folded into the shard.
one par1a "${P[@]}" --set model.train_batch_size=2 --set model.grad_accumulation_steps=$((2 * W))
hsdp par4a "${P[@]}" --set model.train_batch_size=2 --set model.grad_accumulation_steps=2 --set model.sharding_strategy=hybrid_shard
echo "== parity 125m, 2 micro-batches per rank: 1 GPU x$((2 * W)) vs HSDP ${NN}x$PN x2 (bf16)"; paste <(traj /tmp/par1a) <(traj /tmp/par4a)
one par1h "${P[@]}" --set model.grad_accumulation_steps=$W --set trainer.precision=fp16
hsdp par4h "${P[@]}" --set model.sharding_strategy=hybrid_shard --set trainer.precision=fp16
echo "== parity 125m fp16: 1 GPU x$W vs HSDP ${NN}x$PN"; paste <(traj /tmp/par1h) <(traj /tmp/par4h)
fi
[ "$MODE" = parity ] && exit 0
for m in 125m 1b; do
  if [ $m = 125m ]; then bs=16; else bs=4; fi
  S=(--config examples/llama3-1b-gpu.yaml --set model.shape=$m --set model.train_batch_size=$bs --set trainer.max_steps=30 --set trainer.log_every_n_steps=5)
  echo "== $m 1 GPU"; one one_$m "${S[@]}"; tail -1 /tmp/one_$m/metrics.jsonl
  echo "== $m HSDP ${NN}x$PN"; hsdp hsdp_$m "${S[@]}" --set model.sharding_strategy=hybrid_shard
  grep -E "shard group" /tmp/hsdp_$m.0.log | head -1; tail -1 /tmp/hsdp_$m/metrics.jsonl; grep -iE "error|fail" /tmp/hsdp_$m.0.log | tail -3
done
cp /tmp/par4.0.log /tmp/hsdp_1b.0.log /tmp/hsdp_125m.0.log $OUT/ 2>/dev/null
