// Data subcommands: prepare, tokenize, detokenize (docs/TRAINER.md, "Data").
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "core/cli.h"
#include "runtime/cmd/commands.h"
#include "runtime/data/prepare/prepare.h"
#include "runtime/data/sft/prepare.h"
#include "runtime/data/tokenizer/tokenizer.h"
#include "contract/exit_code_for.h"

namespace hypertrain::cmd {
namespace {

bool ParseInt(const std::string& s, int64_t min, int64_t* out) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || v < min) return false;
  *out = v;
  return true;
}

int Fail(const char* cmd, const Status& s) {
  spdlog::error("hypertrain {}: {}", cmd, s.message());
  return contract::ExitCodeFor(s);
}

struct PrepareFlags {
  data::prepare::PrepareOptions options;
  std::string bos = "auto";
  bool sft = false;
  std::string chat_format = "llama3";
};

int RunPrepare(const PrepareFlags& f) {
  data::prepare::PrepareOptions o = f.options;
  o.bos = f.bos == "always"  ? data::prepare::BosPolicy::kAlways
          : f.bos == "never" ? data::prepare::BosPolicy::kNever
                             : data::prepare::BosPolicy::kAuto;
  if (!f.sft) {
    auto m = data::prepare::Prepare(o);
    if (!m.ok()) return Fail("prepare", m.status());
    return contract::kExitOk;
  }
  auto format = data::sft::ParseChatFormat(f.chat_format);
  if (!format.ok()) return Fail("prepare", format.status());
  data::sft::PrepareOptions so;
  so.inputs = o.inputs;
  so.out_dir = o.out_dir;
  so.tokenizer_dir = o.tokenizer_dir;
  so.format = *format;
  so.overwrite = o.overwrite;
  auto m = data::sft::Prepare(so);
  if (!m.ok()) return Fail("prepare", m.status());
  spdlog::info("prepare: {} SFT samples, {} tokens ({} in the loss) in {}", (*m)["samples"].get<int64_t>(),
               (*m)["tokens"].get<int64_t>(), (*m)["target_tokens"].get<int64_t>(), so.out_dir);
  return contract::kExitOk;
}

int RunTokenize(const std::string& dir, const tokenizer::EncodeOptions& eo) {
  auto tok = tokenizer::Tokenizer::FromDir(dir);
  if (!tok.ok()) return Fail("tokenize", tok.status());
  const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  auto ids = (*tok)->Encode(text, eo);
  if (!ids.ok()) return Fail("tokenize", ids.status());
  std::string out;
  for (size_t i = 0; i < ids->size(); ++i) out += fmt::format("{}{}", i ? " " : "", (*ids)[i]);
  out += "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return contract::kExitOk;
}

int RunDetokenize(const std::string& dir, const tokenizer::DecodeOptions& d) {
  auto tok = tokenizer::Tokenizer::FromDir(dir);
  if (!tok.ok()) return Fail("detokenize", tok.status());
  std::vector<int32_t> ids;
  std::string word;
  while (std::cin >> word) {
    int64_t v = 0;
    if (!ParseInt(word, 0, &v) || v > INT32_MAX) {
      return Fail("detokenize", InvalidArgument(fmt::format("'{}' is not a token id", word)));
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  auto text = (*tok)->Decode(ids, d);
  if (!text.ok()) return Fail("detokenize", text.status());
  std::fwrite(text->data(), 1, text->size(), stdout);
  return contract::kExitOk;
}

void AddTokenizerFlag(CLI::App& app, std::string* dir) {
  app.add_option("--tokenizer", *dir, "Directory with tokenizer.json (+ tokenizer_config.json)")
      ->type_name("DIR")
      ->required();
}

}  // namespace

Command AddPrepareCommand(CLI::App& hypertrain) {
  CLI::App* app = hypertrain.add_subcommand("prepare", "Tokenize text/JSONL/HF datasets into token shards");
  app->footer(
      "Writes DIR/shard_00000.bin, ... and DIR/manifest.json. INPUT: *.jsonl[.gz] (one document per\n"
      "line), a text file[.gz] (one document), a Hugging Face dataset directory (save_to_disk) or\n"
      "*.arrow file (text rows, or pre-tokenized input_ids rows copied as they are). Each document\n"
      "ends with the tokenizer's EOS (bytes: 0). With --sft: supervised fine-tuning samples instead,\n"
      "each JSONL line {\"messages\": [{\"role\", \"content\"}, ...]} or {\"prompt\", \"completion\"},\n"
      "rendered in --chat-format, loss on the assistant turns only (DIR/samples.bin + manifest.json).");
  auto f = std::make_shared<PrepareFlags>();
  data::prepare::PrepareOptions& o = f->options;
  app->add_option("INPUT", o.inputs, "Files or directories to tokenize")->type_name("FILE|DIR")->required();
  app->add_option("--out", o.out_dir, "Output directory of the shards")->type_name("DIR")->required();
  app->add_option("--tokenizer", o.tokenizer_dir,
                  "Directory with tokenizer.json + tokenizer_config.json (default: bytes, vocab 256)")
      ->type_name("DIR");
  app->add_option("--text-field", o.input.text_field, "JSONL field / Arrow column with the text")
      ->type_name("NAME");
  app->add_option("--split", o.input.split, "Split of a DatasetDict")->type_name("NAME");
  app->add_option("--tokens-per-shard", o.tokens_per_shard, "Tokens per shard file")
      ->type_name("N")
      ->check(cli::IntRange(2));
  app->add_option("--workers", o.workers, "Tokenizer threads (0: one per core)")
      ->type_name("N")
      ->check(cli::IntRange(0, 1024));
  app->add_option("--bos", f->bos, "BOS before each document (auto: as the tokenizer does)")
      ->type_name("")
      ->check(cli::OneOf({"auto", "always", "never"}));
  app->add_flag("--overwrite", o.overwrite, "Replace a non-empty DIR (only once the new data is complete)");
  app->add_flag("!--no-progress", o.progress, "No progress line on stderr");
  app->add_flag("--sft", f->sft, "Supervised fine-tuning samples (needs --tokenizer; see below)");
  app->add_option("--chat-format", f->chat_format, "Chat template of --sft (none: BOS prompt completion EOS)")
      ->type_name("")
      ->check(cli::OneOf({"llama3", "llama2", "none"}));
  return {app, [f](const LogFlags&) { return RunPrepare(*f); }};
}

Command AddTokenizeCommand(CLI::App& hypertrain) {
  CLI::App* app = hypertrain.add_subcommand("tokenize", "Print the token ids of standard input");
  app->footer("Reads standard input as one text and prints its token ids separated by spaces.");
  auto dir = std::make_shared<std::string>();
  auto eo = std::make_shared<tokenizer::EncodeOptions>();
  AddTokenizerFlag(*app, dir.get());
  app->add_flag("!--no-special", eo->add_special, "No BOS/EOS from the tokenizer's template");
  app->add_flag("!--plain-special", eo->parse_special,
                "Special-token text (e.g. <|eot_id|>) is encoded as plain text");
  return {app, [dir, eo](const LogFlags&) { return RunTokenize(*dir, *eo); }};
}

Command AddDetokenizeCommand(CLI::App& hypertrain) {
  CLI::App* app = hypertrain.add_subcommand("detokenize", "Print the text of token ids on standard input");
  app->footer("Reads token ids (separated by spaces or newlines) from standard input and prints the text.");
  auto dir = std::make_shared<std::string>();
  auto d = std::make_shared<tokenizer::DecodeOptions>();
  AddTokenizerFlag(*app, dir.get());
  app->add_flag("--skip-special", d->skip_special, "Drop special tokens");
  return {app, [dir, d](const LogFlags&) { return RunDetokenize(*dir, *d); }};
}

}  // namespace hypertrain::cmd
