#!/usr/bin/env python3
"""Compares two runs' metrics.jsonl (bf16 vs FP8, same seed and data):

  python3 tools/fp8_parity_report.py BF16.jsonl FP8.jsonl [--every 100]

Prints the final loss of each (the last step's, and the mean of the last 100
steps, since single-batch losses are noisy), their relative difference, the
largest per-step relative difference, loss spikes (a step whose loss exceeds
the median of the previous 50 steps by more than 25%, after step 50), and a
markdown table of both curves (mean loss per window of --every steps).
"""
import json
import statistics
import sys


def load(path):
    steps = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            m = json.loads(line)
            steps[int(m["step"])] = float(m["loss"])
    return steps


def spikes(losses):
    out = []
    for i in range(50, len(losses)):
        med = statistics.median(losses[i - 50:i])
        if losses[i] > 1.25 * med:
            out.append((i + 1, losses[i], med))
    return out


def main():
    args = sys.argv[1:]
    every = 100
    if "--every" in args:
        k = args.index("--every")
        every = int(args[k + 1])
        del args[k:k + 2]
    if len(args) != 2:
        print(__doc__)
        return 2
    a, b = load(args[0]), load(args[1])
    common = sorted(set(a) & set(b))
    if not common:
        print("no common steps")
        return 1
    la = [a[s] for s in common]
    lb = [b[s] for s in common]
    n = len(common)
    tail = min(100, n)
    fa, fb = statistics.mean(la[-tail:]), statistics.mean(lb[-tail:])
    print(f"steps compared: {n} (1..{common[-1]})")
    print(f"final loss (step {common[-1]}): bf16 {la[-1]:.4f}, fp8 {lb[-1]:.4f}, "
          f"rel diff {(lb[-1] - la[-1]) / la[-1]:+.3%}")
    print(f"mean of the last {tail} steps: bf16 {fa:.4f}, fp8 {fb:.4f}, rel diff {(fb - fa) / fa:+.3%}")
    worst = max(range(n), key=lambda i: abs(lb[i] - la[i]) / la[i])
    print(f"largest per-step rel diff: {(lb[worst] - la[worst]) / la[worst]:+.3%} at step {common[worst]}")
    for name, ls in (("bf16", la), ("fp8", lb)):
        sp = spikes(ls)
        print(f"{name} spikes (> 1.25x median of previous 50): {len(sp)}"
              + ("" if not sp else " e.g. " + ", ".join(f"step {s}: {l:.3f} vs {m:.3f}" for s, l, m in sp[:5])))
        if any(x != x or x == float("inf") for x in ls):
            print(f"{name}: NON-FINITE loss")
    print()
    print(f"| steps | bf16 loss (mean) | fp8 loss (mean) | rel diff |")
    print("|---|---|---|---|")
    for start in range(0, n, every):
        wa = la[start:start + every]
        wb = lb[start:start + every]
        ma, mb = statistics.mean(wa), statistics.mean(wb)
        print(f"| {common[start]}–{common[min(start + every, n) - 1]} | {ma:.4f} | {mb:.4f} | {(mb - ma) / ma:+.2%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
