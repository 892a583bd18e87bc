#!/usr/bin/env bash
# Multi-GPU bit-identical resume (docs/CHECKPOINTS.md, "GPU checks"): 125m on the
# CUDA backend, 2 ranks HSDP on one node; 8 steps straight vs 4 steps, stop,
# resume with no flag, 8 steps; the final shard files must be byte-identical.
# Run on a machine with >= 2 GPUs from the repo root after tools/gpu_bundle.sh.
set -u
R=$(pwd); export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ -d .gpu ] || tar -xJf .gpu-pack/bundle.tar.xz
. tools/gpu_cuda_libs.sh
export LD_LIBRARY_PATH=$R/.gpu/lib:$CUDA_LIB_DIRS
H=$R/.gpu/bin/hypertrain
S=(--config examples/tiny-cpu.yaml --set trainer.backend=cuda --set model.shape=125m --set model.max_context_width=512
   --set model.data.use_synthetic_data=true --set model.optim.sched.name=constant --set exp_manager.every_n_train_steps=4
   --set trainer.log_every_n_steps=1)
run() { MASTER_ADDR=127.0.0.1 MASTER_PORT=$((21000 + RANDOM % 9000)) NNODES=1 NODE_RANK=0 HYPERTRAIN_JOB_NAME=r$RANDOM \
  timeout 150 $H launch --nproc-per-node 2 -- train "${S[@]}" "$@"; }
run --set exp_manager.exp_dir=/tmp/r-straight --set trainer.max_steps=8 > /tmp/r1.log 2>&1 || { tail -20 /tmp/r1.log; exit 1; }
run --set exp_manager.exp_dir=/tmp/r-resumed --set trainer.max_steps=4 > /tmp/r2.log 2>&1 || { tail -20 /tmp/r2.log; exit 1; }
run --set exp_manager.exp_dir=/tmp/r-resumed --set trainer.max_steps=8 > /tmp/r3.log 2>&1 || { tail -20 /tmp/r3.log; exit 1; }
grep -h "resumed" /tmp/r3.log | head -2
loss() { grep -o '"loss":[^,]*,.*"step":[0-9]*' "$1"/metrics.jsonl | sed 's/"loss":\([^,]*\),.*"step":\([0-9]*\)/\2 \1/'; }
echo "step loss: straight | resumed"; paste <(loss /tmp/r-straight) <(loss /tmp/r-resumed | tail -8)
bad=0; n=0
for f in /tmp/r-straight/checkpoints/step-8/shard-*; do n=$((n+1)); cmp "$f" "/tmp/r-resumed/checkpoints/step-8/$(basename "$f")" || bad=1; done
echo "compared $n shard files: $([ $bad = 0 ] && [ $n -gt 0 ] && echo IDENTICAL || echo DIFFERENT)"
