#!/usr/bin/env python3
"""PyTorch anchor for issue 26's LoRA benchmark: plain PyTorch LoRA on
transformers' LlamaForCausalLM (sdpa attention), the way the issue states it:
frozen bf16 base, rank-16 adapters (fp32 parameters, bf16 autocast) on all
seven projections, activation checkpointing (non-reentrant, per decoder
layer), fused AdamW over the adapters only; eager, or with --compile layer
(torch.compile of every decoder layer, the torchtitan recipe) or --compile
model (the whole LlamaForCausalLM), issue 36's anchor. Prints tokens/s (median
step) and peak memory (torch.cuda.max_memory_allocated, as hypertrain's
allocated_bytes excludes the CUDA context) per shape, and one JSON line each.

  python3 tools/bench/peft_anchor.py                       # 1b and 8b, 2x2048, rank 16, dropout 0.1
  python3 tools/bench/peft_anchor.py --model 8b --dropout 0 --steps 10
  python3 tools/bench/peft_anchor.py --model 1b --compile layer   # compile time is not timed

No `peft` package needed: the adapter is the LoraLayer math written out,
y = x W^T + (alpha/r) * dropout(x) A^T B^T, A kaiming-uniform, B zero.
"""
import argparse
import json
import math
import statistics
import time

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

SHAPES = {
    "1b": dict(vocab_size=128256, hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, intermediate_size=8192, rope_theta=500000.0,
               rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                                 high_freq_factor=4.0, original_max_position_embeddings=8192),
               tie_word_embeddings=True),
    "8b": dict(vocab_size=128256, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, intermediate_size=14336, rope_theta=500000.0,
               rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                 high_freq_factor=4.0, original_max_position_embeddings=8192),
               tie_word_embeddings=False),
}
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class LoraLinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int, alpha: float, dropout: float):
        super().__init__()
        self.base = base
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, device=base.weight.device,
                                               dtype=torch.float32))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, device=base.weight.device,
                                               dtype=torch.float32))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.scaling = alpha / rank
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x):
        return self.base(x) + (self.dropout(x) @ self.lora_A.t() @ self.lora_B.t()) * self.scaling


def add_lora(model, rank, alpha, dropout):
    for layer in model.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name in TARGETS:
                if hasattr(parent, name):
                    setattr(parent, name, LoraLinear(getattr(parent, name), rank, alpha, dropout))


def run(model_name, batch, seq, rank, alpha, dropout, steps, warmup, compile_mode="none"):
    cfg = LlamaConfig(max_position_embeddings=max(seq, 2048), rms_norm_eps=1e-5, use_cache=False,
                      attention_bias=False, mlp_bias=False, hidden_act="silu",
                      attn_implementation="sdpa", **SHAPES[model_name])
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM._from_config(cfg, torch_dtype=torch.bfloat16)
    model.requires_grad_(False)  # the frozen bf16 base: no grads, no optimizer state
    add_lora(model, rank, alpha, dropout)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    if compile_mode == "layer":
        for layer in model.model.layers:
            layer.compile()
    elif compile_mode == "model":
        model.compile()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=2e-4, weight_decay=0.0, fused=True)
    x = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
    y = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x).logits
            loss = nn.functional.cross_entropy(logits.view(-1, logits.size(-1)).float(), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    times = []
    for i in range(warmup + steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    dt = statistics.median(times)
    r = dict(model=model_name, batch=batch, seq=seq, rank=rank, dropout=dropout,
             trainable=sum(p.numel() for p in params), tokens_per_s=batch * seq / dt,
             step_ms=dt * 1e3, peak_allocated_gib=torch.cuda.max_memory_allocated() / 2**30,
             peak_reserved_gib=torch.cuda.max_memory_reserved() / 2**30, loss=float(loss),
             device=torch.cuda.get_device_name(), torch=torch.__version__, compile=compile_mode)
    print(f"{model_name} {batch}x{seq} LoRA r{rank} (all 7, dropout {dropout}, full checkpointing, "
          f"fused AdamW, {'eager' if compile_mode == 'none' else 'torch.compile ' + compile_mode}): {r['tokens_per_s']:.0f} tok/s, step {r['step_ms']:.1f} ms, "
          f"peak allocated {r['peak_allocated_gib']:.2f} GiB (reserved "
          f"{r['peak_reserved_gib']:.2f}), {r['trainable']} trainable, {r['device']}", flush=True)
    print(json.dumps(r), flush=True)
    del model, opt, params
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(SHAPES), action="append")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--compile", choices=("none", "layer", "model"), default="none")
    a = ap.parse_args()
    for m in a.model or ["1b", "8b"]:
        run(m, a.batch, a.seq, a.rank, a.alpha, a.dropout, a.steps, a.warmup, a.compile)


if __name__ == "__main__":
    main()
