#!/usr/bin/env python3
"""Tokenizes a NUL-separated text corpus (tools/text_corpus.sh) into one
hypertrain token shard (docs/TRAINER.md: "HTTOKENS", version 1) with a
Hugging Face tokenizer.json and the `tokenizers` package:

  python3 tools/tokenize_text.py --tokenizer tokenizer.json --out shard.bin \\
      [--max-tokens N] CORPUS.txt[.xz]

Each document becomes BOS ids EOS (the tokenizer's <s> / </s>, or
<|begin_of_text|> / <|end_of_text|>); ids are uint16 when the vocabulary
fits, else uint32. The shard is written atomically (temp, fsync, rename).
"""
import argparse
import lzma
import os
import struct
import sys

import numpy as np
from tokenizers import Tokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-tokens", type=int, default=0)
    ap.add_argument("corpus")
    a = ap.parse_args()
    tok = Tokenizer.from_file(a.tokenizer)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    bos = tok.token_to_id("<s>") if tok.token_to_id("<s>") is not None else tok.token_to_id("<|begin_of_text|>")
    eos = tok.token_to_id("</s>") if tok.token_to_id("</s>") is not None else tok.token_to_id("<|end_of_text|>")
    if bos is None or eos is None:
        sys.exit("tokenize_text: the tokenizer has no <s>/</s> or <|begin_of_text|>/<|end_of_text|>")
    opener = lzma.open if a.corpus.endswith(".xz") else open
    with opener(a.corpus, "rb") as f:
        docs = [d.decode("utf-8", "replace") for d in f.read().split(b"\0") if d.strip()]
    dtype = np.uint16 if vocab <= 65536 else np.uint32
    parts, total = [], 0
    for start in range(0, len(docs), 256):
        for enc in tok.encode_batch(docs[start:start + 256], add_special_tokens=False):
            ids = np.asarray([bos] + enc.ids + [eos], dtype=dtype)
            parts.append(ids)
            total += len(ids)
        if a.max_tokens and total >= a.max_tokens:
            break
    ids = np.concatenate(parts)
    if a.max_tokens:
        ids = ids[:a.max_tokens]
    header = b"HTTOKENS" + struct.pack("<IIQI", 1, ids.itemsize, len(ids), vocab)
    header += b"\0" * (64 - len(header))
    tmp = f"{a.out}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(header)
        f.write(ids.tobytes())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, a.out)
    print(f"{a.out}: {len(ids)} tokens (vocab {vocab}, {ids.itemsize} bytes each) from {len(parts)} documents")


if __name__ == "__main__":
    sys.exit(main())
