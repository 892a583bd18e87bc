#!/usr/bin/env python3
"""SFT conversations from real English text (issue 36's quality run).

Reads the JSONL corpus of tools/text_corpus.sh ({"text": ...} per document,
gzip) and writes {"prompt": ..., "completion": ...} lines for
`hypertrain prepare --sft`: every paragraph of 40-400 words becomes one
turn pair, the prompt "Continue this text:\\n\\n" + its first half and the
completion its second half, so the loss falls on real text the model must
continue. Deterministic: documents in corpus order, no sampling.

  python3 tools/bench/sft_from_corpus.py CORPUS.jsonl.gz OUT.jsonl [MAX_PAIRS]
"""
import gzip
import json
import sys


def pairs(path):
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            text = json.loads(line).get("text", "")
            for para in text.split("\n\n"):
                words = para.split()
                if not 40 <= len(words) <= 400:
                    continue
                half = len(words) // 2
                yield {"prompt": "Continue this text:\n\n" + " ".join(words[:half]),
                       "completion": " ".join(words[half:])}


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else 1 << 30
    n = 0
    with open(sys.argv[2], "w", encoding="utf-8") as out:
        for p in pairs(sys.argv[1]):
            out.write(json.dumps(p) + "\n")
            n += 1
            if n >= limit:
                break
    print(f"{n} prompt/completion pairs -> {sys.argv[2]}")
    if n == 0:
        sys.exit("no paragraph of 40-400 words in the corpus")


if __name__ == "__main__":
    main()
