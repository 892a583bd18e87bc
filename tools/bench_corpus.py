#!/usr/bin/env python3
"""Writes the tokenizer benchmark's mixed corpus (docs/PERF.md) as JSONL.

About 30 MB of real text found on a Debian machine, one document per line
({"text": ...}), in a fixed shuffled order: English prose (Debian changelogs,
licenses), source code (Python's standard library, this repository's C++),
German/French/Russian man pages (accented Latin, Cyrillic), Korean, Japanese
and Chinese man pages (Hangul, kana, CJK), and the tokenizer test corpus
(emoji, whitespace runs, digits).

usage: tools/bench_corpus.py OUT.jsonl [--mb 35]   (about 30 MB of text)
"""
import argparse
import glob
import gzip
import json
import os
import random

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def take(paths, budget):
    docs, used = [], 0
    for p in sorted(paths):
        text = read(p)
        if not text.strip():
            continue
        docs.append(text)
        used += len(text.encode())
        if used >= budget:
            break
    return docs, used


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=35)
    args = ap.parse_args()
    mb = int(args.mb * 1e6)
    groups = {
        "english": (glob.glob("/usr/share/doc/*/changelog*.gz") + glob.glob("/usr/share/common-licenses/*"), 0.30),
        "code": (glob.glob("/usr/lib/python3*/**/*.py", recursive=True)
                 + glob.glob(os.path.join(ROOT, "runtime/**/*.cc"), recursive=True), 0.30),
        "european": ([p for l in ("de", "fr", "ru", "es", "pl")
                      for p in glob.glob(f"/usr/share/man/{l}/**/*.gz", recursive=True)], 0.28),
        "cjk": ([p for l in ("ko", "ja", "zh_CN", "zh_TW")
                 for p in glob.glob(f"/usr/share/man/{l}/**/*.gz", recursive=True)], 0.12),
    }
    docs, sizes = [], {}
    for name, (paths, share) in groups.items():
        d, used = take(paths, int(mb * share))
        docs += d
        sizes[name] = used
    with open(os.path.join(ROOT, "runtime/data/tokenizer/testdata/corpus.json"), encoding="utf-8") as f:
        docs += [t for t in json.load(f) if t]
    random.Random(21).shuffle(docs)
    with open(args.out, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")
    total = os.path.getsize(args.out)
    print(f"{args.out}: {len(docs)} documents, {total / 1e6:.1f} MB ("
          + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sizes.items()) + ")")


if __name__ == "__main__":
    main()
