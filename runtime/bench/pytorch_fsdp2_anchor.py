#!/usr/bin/env python3
"""PyTorch FSDP2 anchor (the torchtitan recipe) for hypertrain's multi-GPU benchmarks.

LlamaForCausalLM (sdpa; shapes and MFU formula of pytorch_anchor.py) built on the meta device,
each decoder block wrapped with activation checkpointing (none | selective | full), compiled
per block with torch.compile, then sharded per block with `fully_shard` (bf16 params, fp32
reduce), the root last; weights materialised and initialised on the GPU, shard by shard.
Prints tokens/s per GPU, MFU, peak memory per GPU (rank 0's max_memory_allocated) and the time
from process start to the first finished step.

`selective` saves what hypertrain's `selective` keeps (the outputs of the GEMMs and of the
attention kernel) and recomputes the rest (norms, SwiGLU product, RoPE); `full` keeps only each
block's input.

  torchrun --nproc-per-node 4 runtime/bench/pytorch_fsdp2_anchor.py --model 8b --seq 8192 --batch 1 --ac selective
  torchrun --nproc-per-node 4 runtime/bench/pytorch_fsdp2_anchor.py --model 1b --mesh 2x2
"""
import argparse
import os
import statistics
import sys
import time

T_START = time.perf_counter()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding  # noqa: E402

try:  # torch >= 2.6
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
except ImportError:  # torch 2.4 / 2.5
    from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper  # noqa: E402
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_anchor import SHAPES, flops_per_token, peak_flops  # noqa: E402

# Ops whose outputs selective checkpointing keeps.
_SAVE = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default}
for _name in ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
              "_scaled_dot_product_cudnn_attention"):
    if hasattr(torch.ops.aten, _name):
        _SAVE.add(getattr(torch.ops.aten, _name).default)


def _selective_policy(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE if op in _SAVE else CheckpointPolicy.PREFER_RECOMPUTE


def wrap_block(block, ac):
    if ac == "full":
        return checkpoint_wrapper(block, preserve_rng_state=False)
    if ac == "selective":
        return checkpoint_wrapper(block, preserve_rng_state=False,
                                  context_fn=lambda: create_selective_checkpoint_contexts(_selective_policy))
    return block


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(SHAPES), required=True)
    ap.add_argument("--batch", type=int, default=1, help="sequences per GPU")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--mesh", default="", help="RxS: R replicas of S-way shard groups (default 1xWORLD)")
    ap.add_argument("--ac", choices=["none", "selective", "full"], default="none")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()

    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    rep, shard = (int(v) for v in a.mesh.split("x")) if a.mesh else (1, world)
    if rep * shard != world:
        sys.exit(f"--mesh {a.mesh}: {rep}x{shard} is not the world size {world}")
    mesh = init_device_mesh("cuda", (rep, shard), mesh_dim_names=("replicate", "shard")) if rep > 1 else \
        init_device_mesh("cuda", (shard,))
    s = dict(SHAPES[a.model])
    cfg = LlamaConfig(max_position_embeddings=max(a.seq, 2048) * 2, rms_norm_eps=1e-5, attention_bias=False,
                      mlp_bias=False, hidden_act="silu", attn_implementation="sdpa", **s)
    torch.manual_seed(0)
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    layers = model.model.layers
    for i, block in enumerate(layers):
        block = wrap_block(block, a.ac)
        if not a.no_compile:
            block = torch.compile(block)
        fully_shard(block, mesh=mesh, mp_policy=mp, reshard_after_forward=i < len(layers) - 1)
        layers[i] = block
    fully_shard(model, mesh=mesh, mp_policy=mp)
    model.to_empty(device="cuda")
    with torch.no_grad():
        for m in model.modules():  # each rank initialises its own shards on the GPU
            if isinstance(m, torch.nn.Linear):
                m.weight.normal_(0.0, 0.02)
            elif isinstance(m, torch.nn.Embedding):
                m.weight.normal_(0.0, 0.02)
            elif hasattr(m, "weight") and m.weight is not None and m.weight.dim() == 1:
                m.weight.fill_(1.0)  # RMSNorm
    model.model.rotary_emb = LlamaRotaryEmbedding(config=cfg, device="cuda")  # a buffer, not sharded
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    g = torch.Generator(device="cuda").manual_seed(1234 + rank)
    x = torch.randint(0, s["vocab_size"], (a.batch, a.seq), device="cuda", generator=g)
    y = torch.randint(0, s["vocab_size"], (a.batch, a.seq), device="cuda", generator=g)
    torch.cuda.reset_peak_memory_stats()

    def step():
        logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)).float(), y.view(-1))
        del logits
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    times, first_step_s = [], None
    for i in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        loss = step().detach()
        torch.cuda.synchronize()
        if first_step_s is None:
            first_step_s = time.perf_counter() - T_START
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    tok_s = a.batch * a.seq / med
    peak, dev = peak_flops()
    mfu = flops_per_token(s, a.seq) * tok_s / peak if peak else 0.0
    mem = torch.cuda.max_memory_allocated() / 2**30
    reserved = torch.cuda.max_memory_reserved() / 2**30
    if rank == 0:
        print(f"pytorch-fsdp2 {a.model:4s} {rep}x{shard} {a.batch}x{a.seq}/GPU ac={a.ac} "
              f"{'eager' if a.no_compile else 'compile'} | {tok_s:9.0f} tok/s/GPU | MFU {100 * mfu:5.1f}% | "
              f"peak mem {mem:6.2f} GiB/GPU (reserved {reserved:.2f}) | step {med * 1e3:7.2f} ms | loss {float(loss):.4f} | "
              f"first step after {first_step_s:.1f} s | {dev} | torch {torch.__version__}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
