#!/usr/bin/env node
// Writes small Hugging Face save_to_disk datasets with apache-arrow (npm), for
// the Arrow reader's and `hypertrain prepare`'s tests:
//   OUT/text_ds   Dataset: columns id (int64) and text (utf8); two files, the
//                 first with two record batches and a null text
//   OUT/dict_ds   DatasetDict with train and test splits (text)
//   OUT/tok_ds    Dataset: input_ids (list<int32>) and attention_mask
//                 (list<int8>), pre-tokenized
//   OUT/expected.json  what each holds, in order
// usage: NODE_PATH=~/.cache/hypertrain/npm/node_modules node make_hf_datasets.js OUT
'use strict';
const fs = require('fs');
const path = require('path');
const arrow = require('apache-arrow');

const out = process.argv[2];
if (!out) throw new Error('usage: make_hf_datasets.js OUT');

function textTable(texts, ids) {
  return new arrow.Table({
    id: arrow.vectorFromArray(ids.map(BigInt), new arrow.Int64()),
    text: arrow.vectorFromArray(texts, new arrow.Utf8()),
  });
}

function writeDataset(dir, tables) {
  fs.mkdirSync(dir, { recursive: true });
  const files = tables.map((t, i) => {
    const name = `data-${String(i).padStart(5, '0')}-of-${String(tables.length).padStart(5, '0')}.arrow`;
    fs.writeFileSync(path.join(dir, name), arrow.tableToIPC(t, 'stream'));
    return { filename: name };
  });
  fs.writeFileSync(path.join(dir, 'state.json'), JSON.stringify({ _data_files: files, _split: null }, null, 2));
  fs.writeFileSync(path.join(dir, 'dataset_info.json'), JSON.stringify({ features: {} }));
}

const docs = [
  'The first document.\nIt has two lines.',
  '서울은 대한민국의 수도입니다.',
  null,
  'Emoji 👍🏽 and café',
  '',
  'def f(x):\n    return x * 2\n',
];
// File 0: two record batches (rows 0-2 and 3-4); file 1: one batch.
const t0 = textTable(docs.slice(0, 3), [0, 1, 2]).concat(textTable(docs.slice(3, 5), [3, 4]));
const t1 = textTable(docs.slice(5), [5]);
writeDataset(path.join(out, 'text_ds'), [t0, t1]);

fs.mkdirSync(path.join(out, 'dict_ds'), { recursive: true });
fs.writeFileSync(path.join(out, 'dict_ds', 'dataset_dict.json'), JSON.stringify({ splits: ['train', 'test'] }));
writeDataset(path.join(out, 'dict_ds', 'train'), [textTable(['train one', 'train two'], [0, 1])]);
writeDataset(path.join(out, 'dict_ds', 'test'), [textTable(['test one'], [0])]);

const rows = [[128000, 9906, 1917, 128001], [1, 2, 3], [], [42, 43]];
const listOf = (t) => new arrow.List(new arrow.Field('item', t, true));
const tokTable = (r) => new arrow.Table({
  input_ids: arrow.vectorFromArray(r, listOf(new arrow.Int32())),
  attention_mask: arrow.vectorFromArray(r.map((x) => x.map(() => 1)), listOf(new arrow.Int8())),
});
writeDataset(path.join(out, 'tok_ds'), [tokTable(rows.slice(0, 2)).concat(tokTable(rows.slice(2)))]);

fs.writeFileSync(path.join(out, 'expected.json'), JSON.stringify({
  text_ds: docs, dict_train: ['train one', 'train two'], tok_ds: rows,
}));
console.log(`wrote datasets under ${out}`);
