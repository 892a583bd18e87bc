#!/usr/bin/env bash
# Run on a 4-GPU machine from the repo root after tools/gpu_bundle.sh (carry .gpu-pack):
#   bash tools/gpu_hsdp_bench.sh
# 4-GPU run: HSDP loss parity on 125m (2x2 vs 1 GPU accumulating 4 micro-batches),
# then HSDP throughput for 125m and 1b as 2 nodes x 2 vs one GPU.
set -u
R=$(pwd); export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ -d .gpu ] || tar -xJf .gpu-pack/bundle.tar.xz
G=$R/.gpu
d=/usr/local/cuda/lib64
for n in libcudnn.so.9 libnccl.so.2; do x=$(find / -xdev -name $n 2>/dev/null | head -1); [ -n "$x" ] && d="$d:$(dirname $x)"; done
export LD_LIBRARY_PATH=$G/lib:$d
B=$G/bin/hypertrain
traj() { sed 's/.*"grad_norm":\([^,]*\),"loss":\([^,]*\),.*"step":\([0-9]*\),.*/\3 \2 \1/' "$1"/metrics.jsonl; }
hsdp() { # $1 = name, rest = args
  local n=$1; shift; local p=$((21000 + RANDOM % 9000))
  for node in 0 1; do
    CUDA_VISIBLE_DEVICES=$((2*node)),$((2*node+1)) MASTER_ADDR=127.0.0.1 MASTER_PORT=$p NNODES=2 NODE_RANK=$node HT_JOB_ID=$n HT_GLOO_HOSTNAME=127.0.0.1 \
      timeout 200 $B launch --nproc-per-node 2 -- train "$@" --set exp_manager.exp_dir=/tmp/$n --set exp_manager.checkpoint_dir=/tmp/$n/ck > /tmp/$n.$node.log 2>&1 &
  done
  wait
}
P=(--config examples/llama3-1b-gpu.yaml --set model.shape=125m --set model.train_batch_size=4 --set trainer.max_steps=6 --set trainer.log_every_n_steps=1 --set model.optim.sched.warmup_steps=2)
CUDA_VISIBLE_DEVICES=0 timeout 120 $B train "${P[@]}" --set model.grad_accumulation_steps=4 --set exp_manager.exp_dir=/tmp/par1 --set exp_manager.checkpoint_dir=/tmp/par1/ck > /tmp/par1.log 2>&1
hsdp par4 "${P[@]}" --set model.sharding_strategy=hybrid_shard
echo "== parity 125m: step loss grad_norm | 1 GPU x4 micro-batches vs HSDP 2x2 (bf16)"; paste <(traj /tmp/par1) <(traj /tmp/par4)
for m in 125m 1b; do
  if [ $m = 125m ]; then bs=16; else bs=4; fi
  S=(--config examples/llama3-1b-gpu.yaml --set model.shape=$m --set model.train_batch_size=$bs --set trainer.max_steps=30 --set trainer.log_every_n_steps=5)
  CUDA_VISIBLE_DEVICES=0 timeout 150 $B train "${S[@]}" --set exp_manager.exp_dir=/tmp/one_$m --set exp_manager.checkpoint_dir=/tmp/one_$m/ck > /tmp/one_$m.log 2>&1
  echo "== $m 1 GPU"; tail -1 /tmp/one_$m/metrics.jsonl
  hsdp hsdp_$m "${S[@]}" --set model.sharding_strategy=hybrid_shard
  echo "== $m HSDP 2x2"; grep -E "shard group" /tmp/hsdp_$m.0.log | head -1; tail -1 /tmp/hsdp_$m/metrics.jsonl; grep -iE "error|exposed|comm" /tmp/hsdp_$m.0.log | tail -3
done
cp /tmp/par4.0.log /tmp/hsdp_1b.0.log /tmp/hsdp_125m.0.log $OUT/ 2>/dev/null
