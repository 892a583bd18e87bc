// Data subcommands: prepare, tokenize, detokenize (docs/TRAINER.md, "Data").
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/cmd/commands.h"
#include "runtime/data/prepare/prepare.h"
#include "runtime/data/sft/prepare.h"
#include "runtime/data/tokenizer/tokenizer.h"
#include "runtime/train/exit_codes.h"

namespace hypertrain::cmd {
namespace {

constexpr char kPrepareUsage[] =
    "usage: hypertrain prepare --out DIR [--tokenizer DIR] [options] INPUT...\n"
    "  Tokenizes INPUTs into token shards DIR/shard_00000.bin, ... and DIR/manifest.json.\n"
    "  INPUT: *.jsonl[.gz] (one document per line), a text file[.gz] (one document), a\n"
    "  Hugging Face dataset directory (save_to_disk) or *.arrow file (text rows, or\n"
    "  pre-tokenized input_ids rows copied as they are).\n"
    "  --tokenizer DIR        tokenizer.json + tokenizer_config.json (default: bytes, vocab 256)\n"
    "  --text-field NAME      JSONL field / Arrow column with the text (default text)\n"
    "  --split NAME           split of a DatasetDict (default train)\n"
    "  --tokens-per-shard N   (default 16777216)\n"
    "  --workers N            tokenizer threads (default: one per core)\n"
    "  --bos auto|always|never  BOS before each document (auto: as the tokenizer does)\n"
    "  --overwrite            replace a non-empty DIR (only once the new data is complete)\n"
    "  --no-progress          no progress line\n"
    "  Each document ends with the tokenizer's EOS (bytes: 0).\n"
    "  --sft                  supervised fine-tuning samples instead: each JSONL line is\n"
    "                         {\"messages\": [{\"role\", \"content\"}, ...]} or {\"prompt\", \"completion\"},\n"
    "                         rendered in --chat-format, loss on the assistant turns only\n"
    "                         (DIR/samples.bin + manifest.json; needs --tokenizer)\n"
    "  --chat-format F        llama3 (default), llama2, none (BOS prompt completion EOS)\n";

constexpr char kTokenizeUsage[] =
    "usage: hypertrain tokenize --tokenizer DIR [--no-special] [--plain-special]\n"
    "  Reads standard input as one text and prints its token ids separated by spaces.\n"
    "  --no-special     no BOS/EOS from the tokenizer's template\n"
    "  --plain-special  special-token text (e.g. <|eot_id|>) is encoded as plain text\n";

constexpr char kDetokenizeUsage[] =
    "usage: hypertrain detokenize --tokenizer DIR [--skip-special]\n"
    "  Reads token ids (separated by spaces or newlines) from standard input and prints the text.\n";

bool IsHelp(const char* a) { return std::strcmp(a, "--help") == 0 || std::strcmp(a, "-h") == 0; }

// "--name value" or "--name=value" at argv[*i]; advances *i.
bool Flag(int argc, char** argv, int* i, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(argv[*i], name, n) != 0) return false;
  if (argv[*i][n] == '=') {
    *value = argv[*i] + n + 1;
    return true;
  }
  if (argv[*i][n] != '\0' || *i + 1 >= argc) return false;
  *value = argv[++*i];
  return true;
}

bool ParseInt(const std::string& s, int64_t min, int64_t* out) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || v < min) return false;
  *out = v;
  return true;
}

int Usage(const char* cmd, const std::string& why, const char* usage) {
  spdlog::error("hypertrain {}: {}", cmd, why);
  std::fputs(usage, stderr);
  return train::kExitConfigError;
}

int Fail(const char* cmd, const Status& s) {
  spdlog::error("hypertrain {}: {}", cmd, s.message());
  return train::ExitCodeFor(s);
}

StatusOr<std::unique_ptr<tokenizer::Tokenizer>> LoadTokenizer(const std::string& dir) {
  if (dir.empty()) return InvalidArgument("--tokenizer DIR is required");
  return tokenizer::Tokenizer::FromDir(dir);
}

}  // namespace

int PrepareMain(int argc, char** argv, const LogFlags&) {
  data::prepare::PrepareOptions o;
  bool sft = false;
  std::string chat_format = "llama3";
  for (int i = 1; i < argc; ++i) {
    std::string v;
    int64_t n = 0;
    if (std::strcmp(argv[i], "--sft") == 0) {
      sft = true;
    } else if (Flag(argc, argv, &i, "--chat-format", &v)) {
      chat_format = v;
    } else if (IsHelp(argv[i])) {
      std::fputs(kPrepareUsage, stdout);
      return train::kExitOk;
    } else if (Flag(argc, argv, &i, "--out", &v)) {
      o.out_dir = v;
    } else if (Flag(argc, argv, &i, "--tokenizer", &v)) {
      o.tokenizer_dir = v;
    } else if (Flag(argc, argv, &i, "--text-field", &v)) {
      o.input.text_field = v;
    } else if (Flag(argc, argv, &i, "--split", &v)) {
      o.input.split = v;
    } else if (Flag(argc, argv, &i, "--tokens-per-shard", &v)) {
      if (!ParseInt(v, 2, &n)) return Usage("prepare", fmt::format("--tokens-per-shard '{}' must be an integer >= 2", v), kPrepareUsage);
      o.tokens_per_shard = n;
    } else if (Flag(argc, argv, &i, "--workers", &v)) {
      if (!ParseInt(v, 1, &n) || n > 1024) return Usage("prepare", fmt::format("--workers '{}' must be in [1, 1024]", v), kPrepareUsage);
      o.workers = static_cast<int>(n);
    } else if (Flag(argc, argv, &i, "--bos", &v)) {
      if (v == "auto") o.bos = data::prepare::BosPolicy::kAuto;
      else if (v == "always") o.bos = data::prepare::BosPolicy::kAlways;
      else if (v == "never") o.bos = data::prepare::BosPolicy::kNever;
      else return Usage("prepare", fmt::format("--bos '{}' is not auto, always or never", v), kPrepareUsage);
    } else if (std::strcmp(argv[i], "--overwrite") == 0) {
      o.overwrite = true;
    } else if (std::strcmp(argv[i], "--no-progress") == 0) {
      o.progress = false;
    } else if (argv[i][0] == '-' && argv[i][1] == '-') {
      return Usage("prepare", fmt::format("unknown flag '{}'", argv[i]), kPrepareUsage);
    } else {
      o.inputs.emplace_back(argv[i]);
    }
  }
  if (o.out_dir.empty() || o.inputs.empty()) {
    return Usage("prepare", "--out and at least one input are required", kPrepareUsage);
  }
  if (sft) {
    auto f = data::sft::ParseChatFormat(chat_format);
    if (!f.ok()) return Usage("prepare", f.status().message(), kPrepareUsage);
    data::sft::PrepareOptions so;
    so.inputs = o.inputs;
    so.out_dir = o.out_dir;
    so.tokenizer_dir = o.tokenizer_dir;
    so.format = *f;
    so.overwrite = o.overwrite;
    auto m = data::sft::Prepare(so);
    if (!m.ok()) return Fail("prepare", m.status());
    spdlog::info("prepare: {} SFT samples, {} tokens ({} in the loss) in {}",
                 (*m)["samples"].get<int64_t>(), (*m)["tokens"].get<int64_t>(),
                 (*m)["target_tokens"].get<int64_t>(), so.out_dir);
    return train::kExitOk;
  }
  auto m = data::prepare::Prepare(o);
  if (!m.ok()) return Fail("prepare", m.status());
  return train::kExitOk;
}

int TokenizeMain(int argc, char** argv, const LogFlags&) {
  std::string dir;
  tokenizer::EncodeOptions eo;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (IsHelp(argv[i])) {
      std::fputs(kTokenizeUsage, stdout);
      return train::kExitOk;
    } else if (Flag(argc, argv, &i, "--tokenizer", &v)) {
      dir = v;
    } else if (std::strcmp(argv[i], "--no-special") == 0) {
      eo.add_special = false;
    } else if (std::strcmp(argv[i], "--plain-special") == 0) {
      eo.parse_special = false;
    } else {
      return Usage("tokenize", fmt::format("unexpected argument '{}'", argv[i]), kTokenizeUsage);
    }
  }
  auto tok = LoadTokenizer(dir);
  if (!tok.ok()) return Fail("tokenize", tok.status());
  const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  auto ids = (*tok)->Encode(text, eo);
  if (!ids.ok()) return Fail("tokenize", ids.status());
  std::string out;
  for (size_t i = 0; i < ids->size(); ++i) out += fmt::format("{}{}", i ? " " : "", (*ids)[i]);
  out += "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return train::kExitOk;
}

int DetokenizeMain(int argc, char** argv, const LogFlags&) {
  std::string dir;
  tokenizer::DecodeOptions d;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (IsHelp(argv[i])) {
      std::fputs(kDetokenizeUsage, stdout);
      return train::kExitOk;
    } else if (Flag(argc, argv, &i, "--tokenizer", &v)) {
      dir = v;
    } else if (std::strcmp(argv[i], "--skip-special") == 0) {
      d.skip_special = true;
    } else {
      return Usage("detokenize", fmt::format("unexpected argument '{}'", argv[i]), kDetokenizeUsage);
    }
  }
  auto tok = LoadTokenizer(dir);
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
  return train::kExitOk;
}

}  // namespace hypertrain::cmd
