#!/usr/bin/env python3
"""PyTorch anchor for hypertrain's benchmark: the same Llama shapes in
transformers' LlamaForCausalLM, sdpa attention, bf16 autocast, fused AdamW,
eager and torch.compile. Prints tokens/s, MFU and peak memory per run.

  python3 runtime/bench/pytorch_anchor.py                 # 125m 16x2048 and 1b 4x2048, eager + compile
  python3 runtime/bench/pytorch_anchor.py --model 1b --batch 4 --seq 2048 --modes eager

MFU uses the same model FLOPs as hypertrain: 6 * (matmul params incl. LM head)
+ 12 * layers * hidden * seq per token, over 989.4e12 (H100/H200 bf16 dense).
"""
import argparse
import json
import statistics
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

SHAPES = {
    # vocab, hidden, layers, heads, kv heads, ffn, rope theta, rope scaling, tied
    "125m": dict(vocab_size=32000, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 num_key_value_heads=4, intermediate_size=2048, rope_theta=10000.0,
                 rope_scaling=None, tie_word_embeddings=True),
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
PEAK = {"H100": 989.4e12, "H200": 989.4e12, "A100": 312e12, "A10": 125e12}


def flops_per_token(s, seq):
    h, l, f, v = s["hidden_size"], s["num_hidden_layers"], s["intermediate_size"], s["vocab_size"]
    d = h // s["num_attention_heads"]
    q, kv = s["num_attention_heads"] * d, s["num_key_value_heads"] * d
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * f
    matmul_params = l * per_layer + v * h
    return 6 * matmul_params + 12 * l * h * seq


def peak_flops():
    name = torch.cuda.get_device_name()
    for k, v in PEAK.items():
        if k in name:
            return v, name
    return 0.0, name


def run(model_name, batch, seq, mode, steps, warmup):
    s = dict(SHAPES[model_name])
    cfg = LlamaConfig(max_position_embeddings=max(seq, 2048), rms_norm_eps=1e-5,
                      attention_bias=False, mlp_bias=False, hidden_act="silu",
                      attn_implementation="sdpa", **s)
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats()
    model = LlamaForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    fwd = torch.compile(model) if mode == "compile" else model
    x = torch.randint(0, s["vocab_size"], (batch, seq), device="cuda")
    y = torch.randint(0, s["vocab_size"], (batch, seq), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = fwd(input_ids=x).logits
            loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)).float(),
                                                     y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
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
    med = statistics.median(times)
    tok_s = batch * seq / med
    peak, dev = peak_flops()
    mfu = flops_per_token(s, seq) * tok_s / peak if peak else 0.0
    mem = torch.cuda.max_memory_allocated() / 2**30
    res = dict(model=model_name, batch=batch, seq=seq, mode=mode, tokens_per_s=tok_s, mfu=mfu,
               peak_mem_gib=mem, step_ms=med * 1e3, loss=float(loss), device=dev,
               torch=torch.__version__)
    print(f"pytorch {model_name:5s} {mode:7s} {batch}x{seq} | {tok_s:9.0f} tok/s | MFU {100*mfu:5.1f}% "
          f"| peak mem {mem:6.2f} GiB | step {med*1e3:7.2f} ms | {dev}", flush=True)
    del model, opt, fwd
    torch.cuda.empty_cache()
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json", help="append one JSON line per run to this file")
    a = ap.parse_args()
    runs = [(a.model, a.batch or (16 if a.model == "125m" else 4), a.seq)] if a.model else \
        [("125m", 16, 2048), ("1b", 4, 2048)]
    for m, b, s in runs:
        for mode in a.modes.split(","):
            try:
                r = run(m, b, s, mode, a.steps, a.warmup)
            except torch.cuda.OutOfMemoryError as e:  # report and go on with the next run
                print(f"pytorch {m} {mode}: out of memory ({e})", file=sys.stderr)
                torch.cuda.empty_cache()
                continue
            if a.json:
                with open(a.json, "a") as f:
                    f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
