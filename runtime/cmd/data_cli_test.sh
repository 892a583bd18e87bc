#!/usr/bin/env bash
# The data commands of the real `hypertrain` binary with the real Llama-3 and
# Llama-2 tokenizers (installed by tools/setup.sh): tokenize / detokenize,
# prepare JSONL with a tokenizer, and a few steps of the `1b` shape (narrowed
# to CPU size, vocab 128256 kept) on the result; bad input exits 2 or 3.
set -euo pipefail

BIN="$PWD/runtime/cmd/hypertrain"
EXAMPLE="$PWD/examples/tiny-cpu.yaml"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
TOK="${HT_TOKENIZERS_DIR:-$HOME/.cache/hypertrain/tokenizers}"
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ ! -f "$TOK/llama3/tokenizer.json" ] || [ ! -f "$TOK/llama2/tokenizer.json" ]; then
  [ -n "${CI:-}" ] && fail "tokenizers missing under $TOK: tools/setup.sh must install them"
  echo "SKIP: tokenizers not installed under $TOK (run tools/setup.sh)"
  exit 0
fi

# tokenize: ids as Hugging Face gives them (runtime/data/tokenizer/testdata).
[ "$(printf 'Hello world' | "$BIN" tokenize --tokenizer "$TOK/llama3")" = "9906 1917" ] || fail "llama3 ids"
[ "$(printf 'Hello world' | "$BIN" tokenize --tokenizer "$TOK/llama2")" = "1 22557 1526" ] || fail "llama2 ids (BOS)"
[ "$(printf 'Hello world' | "$BIN" tokenize --tokenizer "$TOK/llama2" --no-special)" = "22557 1526" ] \
  || fail "llama2 --no-special"
[ "$(printf 'a<|eot_id|>' | "$BIN" tokenize --tokenizer "$TOK/llama3")" = "64 128009" ] || fail "special token"
# detokenize inverts it, multi-line UTF-8 included.
text=$'서울은 대한민국의 수도입니다.\n  code();\tcafé 👍🏽 1234567'
for t in llama3 llama2; do
  got=$(printf '%s' "$text" | "$BIN" tokenize --tokenizer "$TOK/$t" --no-special | "$BIN" detokenize --tokenizer "$TOK/$t")
  [ "$got" = "$text" ] || fail "$t round trip: '$got'"
done

# Errors: exit 2 for usage and unsupported tokenizers, 3 for missing files.
set +e
echo hi | "$BIN" tokenize > /dev/null 2> "$TMP/notok.log"; [ $? -eq 2 ] || fail "tokenize without --tokenizer should exit 2"
grep -q -- "hypertrain tokenize: --tokenizer is required" "$TMP/notok.log" || fail "missing --tokenizer message: $(cat "$TMP/notok.log")"
"$BIN" prepare --out "$TMP/sftx" --sft --chat-format llama4 x.jsonl > /dev/null 2> "$TMP/chat.log"; [ $? -eq 2 ] || fail "a bad --chat-format should exit 2"
grep -q -- "--chat-format: must be llama3, llama2 or none, got 'llama4'" "$TMP/chat.log" || fail "bad --chat-format message: $(cat "$TMP/chat.log")"
mkdir -p "$TMP/wordpiece"
echo '{"model": {"type": "WordPiece", "vocab": {}}}' > "$TMP/wordpiece/tokenizer.json"
echo hi | "$BIN" tokenize --tokenizer "$TMP/wordpiece" > /dev/null 2> "$TMP/wp.log"
[ $? -eq 2 ] || fail "WordPiece should exit 2"
grep -q "model type 'WordPiece' is not supported" "$TMP/wp.log" || fail "WordPiece message: $(cat "$TMP/wp.log")"
echo "1 x" | "$BIN" detokenize --tokenizer "$TOK/llama2" > /dev/null 2>&1; [ $? -eq 2 ] || fail "bad id should exit 2"
"$BIN" prepare --out "$TMP/none" "$TMP/missing.jsonl" > /dev/null 2>&1; [ $? -eq 3 ] || fail "missing input should exit 3"
set -e

# prepare JSONL with the Llama-3 tokenizer, then train the 1b shape on it.
python3 - "$PWD/runtime/data/tokenizer/testdata/corpus.json" > "$TMP/corpus.jsonl" <<'PY'
import json, sys
docs = [d for d in json.load(open(sys.argv[1])) if d]
for i in range(30):
    for d in docs:
        print(json.dumps({"id": i, "text": d}, ensure_ascii=False))
PY
"$BIN" prepare --tokenizer "$TOK/llama3" --out "$TMP/data" --tokens-per-shard 20000 "$TMP/corpus.jsonl" \
  2> "$TMP/prepare.log" || { cat "$TMP/prepare.log"; fail "prepare"; }
grep -q "prepare: .* tokens from 1110 documents" "$TMP/prepare.log" || fail "prepare summary: $(cat "$TMP/prepare.log")"
grep -q '"vocab_size": 128256' "$TMP/data/manifest.json" || fail "manifest vocab"
set +e
"$BIN" prepare --tokenizer "$TOK/llama3" --out "$TMP/data" "$TMP/corpus.jsonl" > /dev/null 2> "$TMP/again.log"
[ $? -eq 2 ] || fail "prepare into a non-empty directory should exit 2"
grep -q "pass --overwrite" "$TMP/again.log" || fail "non-empty message"
set -e

narrow=(--set model.shape=1b --set model.num_hidden_layers=1 --set model.hidden_size=64
        --set model.num_attention_heads=2 --set model.num_key_value_heads=1 --set model.intermediate_size=128
        --set model.max_context_width=32 --set model.train_batch_size=2 --set trainer.max_steps=3
        --set trainer.log_every_n_steps=1 --set model.data.train_dir="$TMP/data" --set exp_manager.exp_dir="$TMP/exp")
"$BIN" train --config "$EXAMPLE" "${narrow[@]}" --set model.data.tokenizer="$TOK/llama3" > "$TMP/train.log" 2>&1 \
  || { cat "$TMP/train.log"; fail "train 1b on Llama-3 shards"; }
grep -q "step 3/3 | loss" "$TMP/train.log" || fail "no step line: $(tail -5 "$TMP/train.log")"
# The same shards refused for another tokenizer or vocab.
set +e
"$BIN" train --config "$EXAMPLE" "${narrow[@]}" --set exp_manager.exp_dir="$TMP/exp2" \
  --set model.data.tokenizer="$TOK/llama2" > "$TMP/other.log" 2>&1
[ $? -eq 2 ] || fail "other tokenizer should exit 2"
grep -q "not with the configured model.data.tokenizer" "$TMP/other.log" || fail "other tokenizer message"
"$BIN" train --config "$EXAMPLE" "${narrow[@]}" --set exp_manager.exp_dir="$TMP/exp3" --set model.vocab_size=32000 \
  > "$TMP/vocab.log" 2>&1
[ $? -eq 2 ] || fail "other vocab should exit 2"
grep -q "model.vocab_size is 32000" "$TMP/vocab.log" || fail "other vocab message"
set -e
echo "PASS"
