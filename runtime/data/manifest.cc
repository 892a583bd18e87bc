#include "runtime/data/manifest.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/atomic_file.h"

namespace hypertrain::data {

using nlohmann::json;

std::string DataManifest::ToJson() const {
  json t = {{"kind", tokenizer.kind}, {"path", tokenizer.path}, {"sha256", tokenizer.sha256},
            {"vocab_size", tokenizer.vocab_size}, {"add_bos", tokenizer.add_bos},
            {"description", tokenizer.description}};
  t["bos_id"] = tokenizer.bos_id ? json(*tokenizer.bos_id) : json(nullptr);
  t["eos_id"] = tokenizer.eos_id ? json(*tokenizer.eos_id) : json(nullptr);
  json in = json::array(), sh = json::array();
  for (const auto& i : inputs) {
    in.push_back({{"path", i.path}, {"format", i.format}, {"bytes", i.bytes}, {"documents", i.documents}, {"tokens", i.tokens}});
  }
  for (const auto& s : shards) sh.push_back({{"file", s.file}, {"tokens", s.tokens}});
  json j = {{"format", kManifestFormat}, {"version", version}, {"tokenizer", t}, {"inputs", in},
            {"shards", sh}, {"bytes_per_token", bytes_per_token}, {"documents", documents},
            {"tokens", tokens}, {"invalid_utf8", invalid_utf8}, {"created", created}};
  return j.dump(2) + "\n";
}

StatusOr<DataManifest> DataManifest::Parse(const std::string& text, const std::string& source) {
  DataManifest m;
  try {
    const json j = json::parse(text);
    if (j.value("format", "") != kManifestFormat) {
      return DataLoss(fmt::format("{}: not a hypertrain token manifest (format '{}')", source, j.value("format", "")));
    }
    m.version = j.at("version").get<int>();
    if (m.version != 1) return DataLoss(fmt::format("{}: unsupported manifest version {}", source, m.version));
    const json& t = j.at("tokenizer");
    m.tokenizer.kind = t.at("kind").get<std::string>();
    m.tokenizer.path = t.value("path", "");
    m.tokenizer.sha256 = t.value("sha256", "");
    m.tokenizer.vocab_size = t.at("vocab_size").get<int64_t>();
    m.tokenizer.add_bos = t.value("add_bos", false);
    m.tokenizer.description = t.value("description", "");
    if (t.contains("bos_id") && t["bos_id"].is_number()) m.tokenizer.bos_id = t["bos_id"].get<int64_t>();
    if (t.contains("eos_id") && t["eos_id"].is_number()) m.tokenizer.eos_id = t["eos_id"].get<int64_t>();
    for (const json& i : j.at("inputs")) {
      m.inputs.push_back({i.at("path").get<std::string>(), i.value("format", ""), i.value("bytes", int64_t{0}),
                          i.value("documents", int64_t{0}), i.value("tokens", int64_t{0})});
    }
    for (const json& s : j.at("shards")) m.shards.push_back({s.at("file").get<std::string>(), s.at("tokens").get<int64_t>()});
    m.bytes_per_token = j.at("bytes_per_token").get<int>();
    m.documents = j.value("documents", int64_t{0});
    m.tokens = j.at("tokens").get<int64_t>();
    m.invalid_utf8 = j.value("invalid_utf8", int64_t{0});
    m.created = j.value("created", "");
  } catch (const std::exception& e) {
    return DataLoss(fmt::format("{}: malformed manifest: {}", source, e.what()));
  }
  return m;
}

StatusOr<std::optional<DataManifest>> ReadManifest(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kManifestFile).string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<DataManifest>();
  HT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  HT_ASSIGN_OR_RETURN(DataManifest m, DataManifest::Parse(text, path));
  return std::optional<DataManifest>(std::move(m));
}

StatusOr<std::string> TokenizerJsonSha256(const std::string& dir_or_file) {
  std::error_code ec;
  const std::string path = std::filesystem::is_directory(dir_or_file, ec)
                               ? (std::filesystem::path(dir_or_file) / "tokenizer.json").string()
                               : dir_or_file;
  auto text = ReadFileToString(path);
  if (!text.ok()) return NotFound(fmt::format("tokenizer: {} not found", path));
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text->data(), text->size(), md, &len, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

Status CheckManifestForModel(const DataManifest& m, const std::string& dir, int64_t model_vocab_size,
                             const std::string& expected_sha256, const std::vector<std::string>& bin_files) {
  const std::string who = m.tokenizer.kind == "bytes" ? std::string("the byte-level tokenizer (vocab 256)")
                                                      : fmt::format("tokenizer {} (sha256 {})", m.tokenizer.path,
                                                                    m.tokenizer.sha256.substr(0, 12));
  if (m.tokenizer.vocab_size != model_vocab_size) {
    return InvalidArgument(fmt::format(
        "{} was prepared with {} whose vocab is {} ids, but model.vocab_size is {}: train a model with "
        "vocab_size {} or prepare the data with the model's tokenizer",
        dir, who, m.tokenizer.vocab_size, model_vocab_size, m.tokenizer.vocab_size));
  }
  if (!expected_sha256.empty() && m.tokenizer.sha256 != expected_sha256) {
    return InvalidArgument(fmt::format(
        "{} was prepared with {}, not with the configured model.data.tokenizer (tokenizer.json sha256 {}): "
        "prepare the data again with that tokenizer",
        dir, who, expected_sha256.substr(0, 12)));
  }
  std::set<std::string> listed;
  for (const auto& s : m.shards) listed.insert(s.file);
  for (const std::string& f : bin_files) {
    const std::string name = std::filesystem::path(f).filename().string();
    if (!listed.count(name)) {
      return InvalidArgument(fmt::format("{}: {} is not a shard of its manifest.json (left from another "
                                         "prepare?); remove it or prepare the directory again",
                                         dir, name));
    }
    listed.erase(name);
  }
  if (!listed.empty()) {
    return DataLoss(fmt::format("{}: shard {} listed in manifest.json is missing", dir, *listed.begin()));
  }
  return Status::Ok();
}

}  // namespace hypertrain::data
