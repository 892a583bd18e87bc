#!/usr/bin/env python3
"""PyTorch HSDP anchor for hypertrain's multi-GPU benchmark: LlamaForCausalLM
(sdpa, same shapes and MFU formula as pytorch_anchor.py) under FSDP1
HYBRID_SHARD on a (replicate, shard) device mesh, bf16 params, fp32 reduce,
BACKWARD_PRE, forward prefetch, fused AdamW, eager. Prints tokens/s per GPU,
MFU and peak memory per GPU (rank 0's max_memory_allocated).

  torchrun --nproc-per-node 4 runtime/bench/pytorch_fsdp_anchor.py --model 1b --shard 2
  torchrun --nproc-per-node 1 runtime/bench/pytorch_fsdp_anchor.py --model 125m --shard 1
"""
import argparse
import functools
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import BackwardPrefetch, MixedPrecision, ShardingStrategy
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaDecoderLayer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_anchor import SHAPES, flops_per_token, peak_flops  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(SHAPES), required=True)
    ap.add_argument("--batch", type=int, help="per GPU (default 16 for 125m, 4 for 1b)")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--shard", type=int, default=2, help="GPUs per shard group ('node')")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    if world % a.shard != 0:
        sys.exit(f"--shard {a.shard} must divide the world size {world}")
    batch = a.batch or (16 if a.model == "125m" else 4)
    s = dict(SHAPES[a.model])
    cfg = LlamaConfig(max_position_embeddings=max(a.seq, 2048), rms_norm_eps=1e-5,
                      attention_bias=False, mlp_bias=False, hidden_act="silu",
                      attn_implementation="sdpa", **s)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    strategy = ShardingStrategy.HYBRID_SHARD if world > 1 else ShardingStrategy.NO_SHARD
    mesh = init_device_mesh("cuda", (world // a.shard, a.shard)) if world > 1 else None
    model = FSDP(model, device_mesh=mesh, sharding_strategy=strategy,
                 auto_wrap_policy=functools.partial(transformer_auto_wrap_policy,
                                                    transformer_layer_cls={LlamaDecoderLayer}),
                 mixed_precision=MixedPrecision(param_dtype=torch.bfloat16,
                                                reduce_dtype=torch.float32,
                                                buffer_dtype=torch.bfloat16),
                 backward_prefetch=BackwardPrefetch.BACKWARD_PRE, forward_prefetch=True,
                 limit_all_gathers=True, use_orig_params=True, device_id=torch.cuda.current_device())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    g = torch.Generator(device="cuda").manual_seed(1234 + rank)
    x = torch.randint(0, s["vocab_size"], (batch, a.seq), device="cuda", generator=g)
    y = torch.randint(0, s["vocab_size"], (batch, a.seq), device="cuda", generator=g)
    torch.cuda.reset_peak_memory_stats()

    def step():
        logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)).float(), y.view(-1))
        loss.backward()
        model.clip_grad_norm_(1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    times = []
    for i in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    tok_s = batch * a.seq / med
    peak, dev = peak_flops()
    mfu = flops_per_token(s, a.seq) * tok_s / peak if peak else 0.0
    mem = torch.cuda.max_memory_allocated() / 2**30
    if rank == 0:
        print(f"pytorch-fsdp {a.model:5s} {world // a.shard}x{a.shard} {batch}x{a.seq}/GPU | "
              f"{tok_s:9.0f} tok/s/GPU | MFU {100 * mfu:5.1f}% | peak mem {mem:6.2f} GiB/GPU | "
              f"step {med * 1e3:7.2f} ms | loss {float(loss):.4f} | {dev} | torch {torch.__version__}",
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
