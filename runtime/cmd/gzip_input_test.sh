#!/usr/bin/env bash
# Damaged compressed input through the real `hypertrain prepare` (issue 40,
# item 3): a .gz cut mid-stream, cut at a line boundary, without its CRC/length
# trailer, with a wrong CRC, or named .gz but not gzip, as text, JSONL and SFT
# JSONL input, exits 3 naming the file and writes no --out. Whole files (and a
# gzip file not named .gz) still prepare.
set -euo pipefail
BIN="$PWD/runtime/cmd/hypertrain"
TMP="$(mktemp -d "${TEST_TMPDIR:-/tmp}/gzip_input.XXXXXX")"
TOK="${HT_TOKENIZERS_DIR:-$HOME/.cache/hypertrain/tokenizers}"
fail() { echo "FAIL: $*" >&2; exit 1; }
passed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }

for i in $(seq 1 4000); do echo "{\"text\": \"line $i: the quick brown fox jumps over the lazy dog $RANDOM\"}"; done > "$TMP/docs.jsonl"
for i in $(seq 1 4000); do echo "line $i: pack my box with five dozen liquor jugs $RANDOM"; done > "$TMP/doc.txt"
gzip -k -9 "$TMP/docs.jsonl" "$TMP/doc.txt"

# Damaged copies of a gzip file $1 under $TMP/bad-<kind>.<ext>.gz ($2 = ext).
damage() {
  local src="$1" ext="$2" size
  size=$(stat -c %s "$src")
  head -c $((size / 2)) "$src" > "$TMP/bad-mid.$ext.gz"          # mid-stream
  head -c $((size - 8)) "$src" > "$TMP/bad-notrailer.$ext.gz"    # no CRC/length
  head -c $((size - 3)) "$src" > "$TMP/bad-halftrailer.$ext.gz"  # part of it
  python3 - "$src" "$TMP/bad-crc.$ext.gz" <<'PY'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
d[-6] ^= 1  # one bit of the CRC-32
open(sys.argv[2], "wb").write(d)
PY
}
damage "$TMP/docs.jsonl.gz" jsonl
damage "$TMP/doc.txt.gz" txt
# A JSONL .gz cut exactly at a line boundary: a complete-looking prefix.
head -n 1000 "$TMP/docs.jsonl" | gzip -9 > "$TMP/head.gz"
python3 - "$TMP/head.gz" "$TMP/bad-line.jsonl.gz" <<'PY'
import sys, zlib
# The deflate stream of the first 1000 lines, flushed (Z_FULL_FLUSH) at the
# end of line 500 and cut there: every byte up to that line inflates cleanly.
lines = open(sys.argv[1][:-len("head.gz")] + "docs.jsonl", "rb").read().splitlines(True)
c = zlib.compressobj(9, zlib.DEFLATED, 31)
out = c.compress(b"".join(lines[:500])) + c.flush(zlib.Z_FULL_FLUSH)
open(sys.argv[2], "wb").write(out)
PY
cp "$TMP/docs.jsonl" "$TMP/bad-plain.jsonl.gz"
cp "$TMP/doc.txt" "$TMP/bad-plain.txt.gz"

expect3() {  # $1 = input, rest = extra prepare flags
  local in="$1" rc=0; shift
  rm -rf "$TMP/out"
  "$BIN" prepare --out "$TMP/out" "$@" "$in" > "$TMP/run.log" 2>&1 || rc=$?
  [ "$rc" -eq 3 ] || { cat "$TMP/run.log"; fail "$(basename "$in"): exit $rc, want 3"; }
  grep -q "$in" "$TMP/run.log" || { cat "$TMP/run.log"; fail "$(basename "$in"): the message does not name the file"; }
  [ ! -e "$TMP/out" ] || fail "$(basename "$in"): --out was written"
}
for kind in mid notrailer halftrailer crc plain; do
  for ext in jsonl txt; do expect3 "$TMP/bad-$kind.$ext.gz"; done
done
expect3 "$TMP/bad-line.jsonl.gz"
grep -q "truncated gzip" "$TMP/run.log" || fail "a cut at a line boundary: $(cat "$TMP/run.log")"
expect3 "$TMP/bad-notrailer.txt.gz"
grep -q "truncated gzip: the stream ends before its CRC/length trailer" "$TMP/run.log" || fail "no-trailer message: $(cat "$TMP/run.log")"
expect3 "$TMP/bad-crc.jsonl.gz"
grep -q "corrupt gzip data: .*incorrect data check" "$TMP/run.log" || fail "CRC message: $(cat "$TMP/run.log")"
expect3 "$TMP/bad-plain.txt.gz"
grep -q "named .gz but not gzip data" "$TMP/run.log" || fail "not-gzip message: $(cat "$TMP/run.log")"
# A bad file after a good one: still exit 3, nothing written.
rc=0; rm -rf "$TMP/out"
"$BIN" prepare --out "$TMP/out" "$TMP/docs.jsonl.gz" "$TMP/bad-line.jsonl.gz" > "$TMP/run.log" 2>&1 || rc=$?
[ "$rc" -eq 3 ] && [ ! -e "$TMP/out" ] || { cat "$TMP/run.log"; fail "good + truncated input: exit $rc"; }
pass "prepare: 13 damaged .gz inputs (text, JSONL: mid-stream, line boundary, trailer, CRC, not gzip) exit 3 naming the file"

# Whole inputs: .gz, and gzip data under a plain name, give the plain file's tokens.
"$BIN" prepare --out "$TMP/plain" "$TMP/docs.jsonl" 2> "$TMP/plain.log"
"$BIN" prepare --out "$TMP/gz" "$TMP/docs.jsonl.gz" 2> "$TMP/gz.log"
cp "$TMP/docs.jsonl.gz" "$TMP/renamed.jsonl"
"$BIN" prepare --out "$TMP/renamed" "$TMP/renamed.jsonl" 2> "$TMP/renamed.log"
for d in gz renamed; do
  cmp <(cat "$TMP/plain"/*.bin) <(cat "$TMP/$d"/*.bin) || fail "$d: tokens differ from the plain file's"
done
pass "prepare: whole .gz and gzip under a plain name give the plain file's tokens"

# SFT JSONL reads through the same path.
if [ -f "$TOK/llama3/tokenizer.json" ]; then
  for i in $(seq 1 300); do
    echo "{\"messages\": [{\"role\": \"user\", \"content\": \"question $i\"}, {\"role\": \"assistant\", \"content\": \"answer $i: $RANDOM $RANDOM\"}]}"
  done > "$TMP/chat.jsonl"
  gzip -k "$TMP/chat.jsonl"
  "$BIN" prepare --sft --tokenizer "$TOK/llama3" --out "$TMP/sft" "$TMP/chat.jsonl.gz" 2> "$TMP/sft.log" ||
    { cat "$TMP/sft.log"; fail "SFT from a whole .gz"; }
  damage "$TMP/chat.jsonl.gz" chat
  cp "$TMP/chat.jsonl" "$TMP/bad-plain.chat.gz"
  for kind in mid notrailer crc plain; do expect3 "$TMP/bad-$kind.chat.gz" --sft --tokenizer "$TOK/llama3"; done
  pass "prepare --sft: a whole .gz prepares; 4 damaged ones exit 3 naming the file"
else
  [ -n "${CI:-}" ] && fail "tokenizers missing under $TOK: tools/setup.sh must install them"
  echo "SKIP: SFT part: tokenizers not installed under $TOK (run tools/setup.sh)"
fi
echo "gzip_input_test: $passed passed"
