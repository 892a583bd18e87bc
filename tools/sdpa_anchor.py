#!/usr/bin/env python3
"""PyTorch SDPA anchor for runtime/kernels/cuda:attention_bench (run on a GPU machine).

Times torch.nn.functional.scaled_dot_product_attention (causal, bf16, GQA via
enable_gqa) with the cuDNN and flash backends for the shapes attention_bench
uses: forward, and forward+backward, median of N runs with CUDA events. FLOPs
are counted as in attention_bench (causal: forward 2*B*T^2*H*D, backward 2.5x).

    python3 tools/sdpa_anchor.py [--iters 50]
"""
import argparse
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [  # (B, T, H, KV, D)
    (4, 2048, 32, 8, 64),    # 1b
    (16, 2048, 12, 4, 64),   # 125m
    (4, 2048, 32, 8, 128),   # head_dim 128
]


def median_ms(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def run(backend, b, t, h, kv, d, iters):
    gen = torch.Generator(device="cuda").manual_seed(1)
    def rnd(heads):
        return torch.randn(b, heads, t, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    q, k, v = rnd(h).requires_grad_(), rnd(kv).requires_grad_(), rnd(kv).requires_grad_()
    dout = rnd(h)
    def fwd():
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv != h)
    def fwd_bwd():
        out = fwd()
        torch.autograd.grad(out, (q, k, v), dout)
    with torch.no_grad():
        f_ms = median_ms(fwd, iters)
    fb_ms = median_ms(fwd_bwd, iters)
    fwd_flops = 4.0 * b * t * t * h * d / 2
    bwd_flops = 2.5 * fwd_flops
    bwd_ms = fb_ms - f_ms
    name = "torch-" + ("cudnn" if backend == SDPBackend.CUDNN_ATTENTION else "flash")
    print(f"{name:13s} B={b:<2d} T={t:<5d} H={h:<2d} KV={kv:<2d} D={d:<3d} | fwd {f_ms:7.3f} ms "
          f"{fwd_flops / f_ms * 1e-9:6.1f} TFLOP/s | bwd(derived) {bwd_ms:7.3f} ms "
          f"{bwd_flops / bwd_ms * 1e-9:6.1f} TFLOP/s | fwd+bwd {fb_ms:7.3f} ms "
          f"{(fwd_flops + bwd_flops) / fb_ms * 1e-9:6.1f} TFLOP/s", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=50)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}")
    for shape in SHAPES:
        for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
            try:
                run(backend, *shape, args.iters)
            except RuntimeError as e:  # a backend that does not take this shape
                print(f"{backend} {shape}: not available: {str(e).splitlines()[0]}", flush=True)


if __name__ == "__main__":
    main()
