#include "runtime/data/sft/prepare.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/atomic_file.h"
#include "runtime/data/input_file.h"
#include "runtime/data/manifest.h"
#include "runtime/data/sft/dataset.h"

namespace hypertrain::data::sft {
namespace {
// One chat sample per line; prepare's document limit.
constexpr int64_t kMaxLineBytes = int64_t{1} << 30;
}  // namespace

StatusOr<nlohmann::json> Prepare(const PrepareOptions& o) {
  namespace fs = std::filesystem;
  if (o.tokenizer_dir.empty()) return InvalidArgument("--sft needs --tokenizer DIR (the model's tokenizer)");
  HT_ASSIGN_OR_RETURN(std::unique_ptr<tokenizer::Tokenizer> tok, tokenizer::Tokenizer::FromDir(o.tokenizer_dir));
  std::error_code ec;
  if (fs::exists(o.out_dir, ec) && !fs::is_empty(o.out_dir, ec) && !o.overwrite) {
    return InvalidArgument(fmt::format("--out {} is not empty (add --overwrite to replace it)", o.out_dir));
  }
  std::string bos, eos;
  if (tok->bos_id()) bos = tok->IdToToken(*tok->bos_id()).value_or("");
  if (tok->eos_id()) eos = tok->IdToToken(*tok->eos_id()).value_or("");
  if (eos.empty()) return InvalidArgument(o.tokenizer_dir + ": the tokenizer has no eos_token");
  std::vector<Sample> samples;
  nlohmann::json inputs = nlohmann::json::array();
  int64_t skipped = 0;
  for (const std::string& path : o.inputs) {
    HT_ASSIGN_OR_RETURN(std::unique_ptr<InputFile> f, InputFile::Open(path));
    std::string line;
    int64_t n = 0;
    while (true) {
      HT_ASSIGN_OR_RETURN(bool more, f->ReadLine(&line, kMaxLineBytes));
      if (!more) break;
      const int64_t lineno = f->lines_read();
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      auto where = [&](const Status& s) {
        return InvalidArgument(fmt::format("{}:{}: {}", path, lineno, s.message()));
      };
      if (j.is_discarded()) return InvalidArgument(fmt::format("{}:{}: not valid JSON", path, lineno));
      StatusOr<std::vector<Message>> ms = MessagesFromJson(j);
      if (!ms.ok()) return where(ms.status());
      StatusOr<std::vector<Segment>> segs = Render(o.format, *ms, bos, eos);
      if (!segs.ok()) return where(segs.status());
      StatusOr<Sample> s = Tokenize(*tok, *segs);
      if (!s.ok()) return where(s.status());
      bool any = false;
      for (uint8_t t : s->target) any |= t != 0;
      if (!any || s->ids.size() < 2) {
        ++skipped;  // e.g. an empty assistant turn
        continue;
      }
      samples.push_back(std::move(*s));
      ++n;
    }
    inputs.push_back({{"path", path}, {"samples", n}});
  }
  if (samples.empty()) return InvalidArgument("the inputs hold no sample with an assistant turn");
  HT_ASSIGN_OR_RETURN(std::string sha, TokenizerJsonSha256(o.tokenizer_dir));
  nlohmann::json m = {{"tokenizer",
                       {{"path", o.tokenizer_dir}, {"sha256", sha}, {"vocab_size", tok->vocab_size()}}},
                      {"chat_format", ChatFormatName(o.format)},
                      {"inputs", inputs},
                      {"skipped", skipped}};
  const std::string tmp = o.out_dir + ".tmp-sft";
  HT_RETURN_IF_ERROR(RemoveTree(tmp));
  Status st = WriteDataset(tmp, samples, static_cast<uint32_t>(tok->vocab_size()), m);
  if (st.ok()) st = RemoveTree(o.out_dir);
  if (st.ok()) st = RenameDurably(tmp, o.out_dir);
  if (!st.ok()) {
    (void)RemoveTree(tmp);
    return st;
  }
  HT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(o.out_dir + "/manifest.json"));
  return nlohmann::json::parse(text);
}

}  // namespace hypertrain::data::sft
