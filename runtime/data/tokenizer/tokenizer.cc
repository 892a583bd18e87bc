#include "runtime/data/tokenizer/tokenizer.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <deque>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "runtime/data/tokenizer/bpe.h"
#include "runtime/data/tokenizer/pipeline.h"
#include "runtime/data/tokenizer/utf8.h"

namespace hypertrain::tokenizer {
namespace {

using nlohmann::json;

constexpr std::string_view kMetaspace = "\xE2\x96\x81";

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

// True when the pipeline (recursively) holds a stage of this type.
bool HasType(const json& j, const std::string& type) {
  if (j.is_object()) {
    if (j.value("type", "") == type) return true;
    for (const auto& [k, v] : j.items()) {
      if (HasType(v, type)) return true;
    }
  } else if (j.is_array()) {
    for (const auto& v : j) {
      if (HasType(v, type)) return true;
    }
  }
  return false;
}

// tokenizer_config.json writes a token as "text" or {"content": "text", ...}.
std::string TokenName(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
  return "";
}

// Cuts before every "▁" that follows another character: exact for
// vocabularies where BpeModel::metaspace_splittable() holds.
void SplitBeforeMetaspace(std::string_view text, std::vector<std::string_view>* pieces) {
  pieces->clear();
  size_t begin = 0;
  for (size_t p = text.find(kMetaspace, 1); p != std::string_view::npos; p = text.find(kMetaspace, p + 1)) {
    const bool after_metaspace = p >= kMetaspace.size() && text.substr(p - kMetaspace.size(), kMetaspace.size()) == kMetaspace;
    if (!after_metaspace && p > begin) {
      pieces->push_back(text.substr(begin, p - begin));
      begin = p;
    }
  }
  if (begin < text.size()) pieces->push_back(text.substr(begin));
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path json_path = dir, config_path;
  if (fs::is_directory(dir, ec)) {
    json_path = fs::path(dir) / "tokenizer.json";
    config_path = fs::path(dir) / "tokenizer_config.json";
  } else if (fs::exists(dir, ec)) {
    config_path = fs::path(dir).parent_path() / "tokenizer_config.json";
  } else {
    return NotFound(fmt::format("tokenizer: {} does not exist (expected a directory with tokenizer.json "
                                "and tokenizer_config.json, as Hugging Face models ship them)", dir));
  }
  auto text = ReadFileToString(json_path.string());
  if (!text.ok()) {
    return NotFound(fmt::format("tokenizer: {} has no tokenizer.json (only Hugging Face 'fast' tokenizers "
                                "are supported: save one with tokenizer.save_pretrained)", dir));
  }
  std::string config;
  if (fs::exists(config_path, ec)) {
    HT_ASSIGN_OR_RETURN(config, ReadFileToString(config_path.string()));
  }
  return FromJson(*text, config, json_path.string());
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(const std::string& tokenizer_json,
                                                         const std::string& config_json,
                                                         const std::string& source) {
  json j;
  try {
    j = json::parse(tokenizer_json);
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
  if (!j.is_object()) return InvalidArgument(fmt::format("{}: not a tokenizer.json object", source));
  auto with_source = [&](const Status& s) { return Status(s.code(), fmt::format("{}: {}", source, s.message())); };
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->sha256_ = Sha256Hex(tokenizer_json);
  try {
    const json model = j.value("model", json());
    const std::string type = model.is_object() ? model.value("type", model.contains("merges") ? "BPE" : "") : "";
    if (type != "BPE") {
      return InvalidArgument(fmt::format("{}: tokenizer model type '{}' is not supported (supported: BPE, "
                                         "as in the Llama, Mistral, GPT-2 and Qwen families)",
                                         source, type.empty() ? std::string("<none>") : type));
    }
    auto normalizer = MakeNormalizer(j.value("normalizer", json()));
    if (!normalizer.ok()) return with_source(normalizer.status());
    t->normalizer_ = std::move(*normalizer);
    auto pre = MakePreTokenizer(j.value("pre_tokenizer", json()));
    if (!pre.ok()) return with_source(pre.status());
    t->pre_tokenizer_ = std::move(*pre);
    const bool byte_level = t->pre_tokenizer_ != nullptr && t->pre_tokenizer_->byte_level();
    if (!byte_level && HasType(j.value("normalizer", json()), "ByteLevel")) {
      return InvalidArgument(fmt::format("{}: a ByteLevel normalizer is not supported (use the ByteLevel "
                                         "pre-tokenizer)", source));
    }
    auto bpe = BpeModel::FromJson(model, byte_level);
    if (!bpe.ok()) return with_source(bpe.status());
    t->model_ = std::move(*bpe);
    auto post = MakePostProcessor(j.value("post_processor", json()));
    if (!post.ok()) return with_source(post.status());
    t->post_processor_ = std::move(*post);
    auto decoder = MakeDecoder(j.value("decoder", json()));
    if (decoder.ok()) {
      t->decoder_ = std::move(*decoder);
    } else {
      t->decoder_error_ = fmt::format("{}: {}", source, decoder.status().message());
    }
    t->vocab_size_ = t->model_->vocab_size();
    std::vector<AddedToken> raw, normalized;
    for (const json& a : j.value("added_tokens", json::array())) {
      AddedToken tok;
      tok.id = a.at("id").get<int32_t>();
      tok.content = a.at("content").get<std::string>();
      tok.special = a.value("special", false);
      tok.lstrip = a.value("lstrip", false);
      tok.rstrip = a.value("rstrip", false);
      tok.single_word = a.value("single_word", false);
      tok.normalized = a.value("normalized", !tok.special);
      if (tok.id < 0 || tok.content.empty()) {
        return InvalidArgument(fmt::format("{}: added token {} has a bad id or empty content", source, a.dump()));
      }
      t->vocab_size_ = std::max(t->vocab_size_, tok.id + 1);
      (tok.normalized ? normalized : raw).push_back(tok);
      t->added_.push_back(std::move(tok));
    }
    t->added_by_id_.assign(t->vocab_size_, -1);
    for (size_t i = 0; i < t->added_.size(); ++i) t->added_by_id_[t->added_[i].id] = static_cast<int32_t>(i);
    if (!raw.empty()) t->raw_matcher_ = std::make_unique<AddedTokenMatcher>(std::move(raw));
    if (!normalized.empty()) t->normalized_matcher_ = std::make_unique<AddedTokenMatcher>(std::move(normalized));
    if (t->post_processor_) {
      t->prefix_ids_ = t->post_processor_->Prefix();
      t->suffix_ids_ = t->post_processor_->Suffix();
    }
  } catch (const json::exception& e) {
    return InvalidArgument(fmt::format("{}: unexpected tokenizer.json content: {}", source, e.what()));
  }
  HT_RETURN_IF_ERROR(t->LoadConfig(config_json, source));
  return t;
}

Status Tokenizer::LoadConfig(const std::string& config_json, const std::string& source) {
  json c = json::object();
  if (!config_json.empty()) {
    try {
      c = json::parse(config_json);
    } catch (const std::exception& e) {
      return InvalidArgument(fmt::format("{}: tokenizer_config.json is not valid JSON: {}", source, e.what()));
    }
  }
  auto resolve = [&](const char* key, std::string* name, std::optional<int32_t>* id) -> Status {
    if (!c.contains(key) || c[key].is_null()) return Status::Ok();
    *name = TokenName(c[key]);
    *id = TokenToId(*name);
    if (!*id) {
      return InvalidArgument(fmt::format("{}: tokenizer_config.json {} '{}' is not a token of this tokenizer",
                                         source, key, *name));
    }
    return Status::Ok();
  };
  std::string pad_name;
  HT_RETURN_IF_ERROR(resolve("bos_token", &bos_token_, &bos_id_));
  HT_RETURN_IF_ERROR(resolve("eos_token", &eos_token_, &eos_id_));
  HT_RETURN_IF_ERROR(resolve("pad_token", &pad_name, &pad_id_));
  add_bos_ = c.contains("add_bos_token") && c["add_bos_token"].is_boolean()
                 ? c["add_bos_token"].get<bool>()
                 : bos_id_ && !prefix_ids_.empty() && prefix_ids_.front() == *bos_id_;
  add_eos_ = c.contains("add_eos_token") && c["add_eos_token"].is_boolean()
                 ? c["add_eos_token"].get<bool>()
                 : eos_id_ && !suffix_ids_.empty() && suffix_ids_.back() == *eos_id_;
  return Status::Ok();
}

Status Tokenizer::EncodePieces(std::string_view text, bool first_section, std::vector<int32_t>* out) const {
  if (text.empty()) return Status::Ok();
  thread_local std::vector<std::string_view> pieces;
  thread_local std::deque<std::string> arena;
  arena.clear();
  if (pre_tokenizer_) {
    pieces.assign(1, text);
    PreTokenizeContext ctx{first_section, &arena};
    HT_RETURN_IF_ERROR(pre_tokenizer_->Apply(ctx, &pieces));
  } else if (model_->metaspace_splittable()) {
    SplitBeforeMetaspace(text, &pieces);
  } else {
    pieces.assign(1, text);
  }
  for (std::string_view p : pieces) model_->Encode(p, out);
  return Status::Ok();
}

Status Tokenizer::EncodeSegment(std::string_view text, bool first_section, bool parse_special,
                                std::vector<int32_t>* out) const {
  std::string normalized;
  std::string_view view = text;
  if (normalizer_) {
    normalized.assign(text);
    normalizer_->Normalize(&normalized);
    view = normalized;
  }
  if (!parse_special || normalized_matcher_ == nullptr) return EncodePieces(view, first_section, out);
  std::vector<Segment> segments;
  normalized_matcher_->Split(view, &segments);
  for (const Segment& s : segments) {
    if (s.token >= 0) {
      out->push_back(s.token);
    } else {
      HT_RETURN_IF_ERROR(EncodePieces(view.substr(s.begin, s.end - s.begin), first_section && s.begin == 0, out));
    }
  }
  return Status::Ok();
}

Status Tokenizer::EncodeTo(std::string_view text, const EncodeOptions& options, std::vector<int32_t>* out) const {
  std::string repaired;
  if (!IsValidUtf8(text)) {
    RepairUtf8(text, &repaired);
    text = repaired;
  }
  if (options.add_special) out->insert(out->end(), prefix_ids_.begin(), prefix_ids_.end());
  try {
    if (options.parse_special && raw_matcher_ != nullptr) {
      std::vector<Segment> segments;
      raw_matcher_->Split(text, &segments);
      for (const Segment& s : segments) {
        if (s.token >= 0) {
          out->push_back(s.token);
        } else {
          HT_RETURN_IF_ERROR(EncodeSegment(text.substr(s.begin, s.end - s.begin), s.begin == 0, true, out));
        }
      }
    } else {
      HT_RETURN_IF_ERROR(EncodeSegment(text, true, options.parse_special, out));
    }
  } catch (const std::exception& e) {
    return Internal(fmt::format("tokenizer: encoding failed: {}", e.what()));
  }
  if (options.add_special) out->insert(out->end(), suffix_ids_.begin(), suffix_ids_.end());
  return Status::Ok();
}

StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  HT_RETURN_IF_ERROR(EncodeTo(text, options, &ids));
  return ids;
}

StatusOr<std::string> Tokenizer::Decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  if (!decoder_error_.empty()) return InvalidArgument(decoder_error_);
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size_) {
      return InvalidArgument(fmt::format("token id {} is out of range [0, {})", id, vocab_size_));
    }
    const int32_t a = added_by_id_[id];
    if (a >= 0) {
      if (options.skip_special && added_[a].special) continue;
      tokens.push_back(added_[a].content);
    } else if (id < model_->vocab_size() && !model_->IdToToken(id).empty()) {
      tokens.push_back(model_->IdToToken(id));
    } else {
      return InvalidArgument(fmt::format("token id {} is not in the vocab", id));
    }
  }
  try {
    if (decoder_) decoder_->DecodeChain(&tokens);
  } catch (const std::exception& e) {
    return Internal(fmt::format("tokenizer: decoding failed: {}", e.what()));
  }
  std::string joined, text;
  for (const std::string& t : tokens) joined += t;
  RepairUtf8(joined, &text);
  return text;
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  for (const AddedToken& a : added_) {
    if (a.content == token) return a.id;
  }
  return model_->TokenToId(token);
}

std::optional<std::string> Tokenizer::IdToToken(int32_t id) const {
  if (id < 0 || id >= vocab_size_) return std::nullopt;
  if (added_by_id_[id] >= 0) return added_[added_by_id_[id]].content;
  if (id < model_->vocab_size() && !model_->IdToToken(id).empty()) return model_->IdToToken(id);
  return std::nullopt;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < vocab_size_ && added_by_id_[id] >= 0 && added_[added_by_id_[id]].special;
}

std::string Tokenizer::Describe() const {
  auto tok = [](const std::string& name, const std::optional<int32_t>& id) {
    return id ? fmt::format("{} ({})", name, *id) : std::string("none");
  };
  return fmt::format("BPE ({}), {} ids, {} added tokens; bos {}{}; eos {}{}",
                     model_->byte_level() ? "byte-level" : "SentencePiece-style", vocab_size_, added_.size(),
                     tok(bos_token_, bos_id_), add_bos_ ? " added per document" : "",
                     tok(eos_token_, eos_id_), add_eos_ ? " added per document" : "");
}

}  // namespace hypertrain::tokenizer
