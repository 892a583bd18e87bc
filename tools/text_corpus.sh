#!/usr/bin/env bash
# Collects real English text this machine carries (Debian's documentation:
# changelogs, NEWS, READMEs, copyright and license texts) into one JSONL corpus
# for runs that need real text rather than synthetic tokens (the FP8 vs bf16
# parity run, docs/PERF.md), with the Llama-2 tokenizer (the 125m shape's
# vocabulary) beside it, ready for `hypertrain prepare`:
#
#   tools/text_corpus.sh OUT_DIR [MAX_MB]      (default 64)
#   hypertrain prepare --tokenizer OUT_DIR/tokenizer --out TOKENS OUT_DIR/corpus.jsonl.gz
#
# Deterministic for a given machine: files in sorted path order, exact
# duplicates (by content) dropped, cut at MAX_MB of text. The tokenizer comes
# from tools/setup.sh's cache (~/.cache/hypertrain/tokenizers/llama2).
set -euo pipefail
out=$(realpath -m "${1:?usage: tools/text_corpus.sh OUT_DIR [MAX_MB]}")
max_mb=${2:-64}
tok=${HYPERTRAIN_CACHE_DIR:-$HOME/.cache/hypertrain}/tokenizers/llama2
[ -f "$tok/tokenizer.json" ] || { echo "text_corpus: no tokenizer in $tok (run tools/setup.sh)" >&2; exit 3; }
mkdir -p "$out/tokenizer"
cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$out/tokenizer/"
python3 - "$out/corpus.jsonl.gz" "$max_mb" <<'PY'
import gzip, hashlib, json, os, sys
out, max_bytes = sys.argv[1], int(sys.argv[2]) * 1000000
names = ("changelog", "NEWS", "README", "copyright")
paths = []
for root in ("/usr/share/common-licenses", "/usr/share/doc"):
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p) or f.endswith((".html", ".pdf", ".png", ".jpg", ".svg")):
                continue
            if root.endswith("licenses") or f.startswith(names) or f.endswith((".md", ".txt", ".md.gz", ".txt.gz")):
                paths.append(p)
seen, total, docs = set(), 0, 0
with gzip.open(out + ".tmp", "wt", encoding="utf-8") as w:
    for p in sorted(paths):
        try:
            data = gzip.open(p).read() if p.endswith(".gz") else open(p, "rb").read()
        except OSError:
            continue
        text = data.decode("utf-8", "replace")
        h = hashlib.md5(text.encode()).digest()
        if not text.strip() or h in seen:
            continue
        seen.add(h)
        w.write(json.dumps({"text": text}) + "\n")
        total += len(text.encode())
        docs += 1
        if total >= max_bytes:
            break
os.replace(out + ".tmp", out)
print(f"{out}: {docs} documents, {total / 1e6:.1f} MB of text, {os.path.getsize(out) / 1e6:.1f} MB compressed")
PY
