// Post-processors of tokenizer.json: TemplateProcessing, ByteLevel (ids
// unchanged), Sequence, BertProcessing, RobertaProcessing.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "runtime/data/tokenizer/pipeline.h"

namespace hypertrain::tokenizer {
namespace {

using nlohmann::json;

// prefix + ids + suffix.
class WrapProcessor final : public PostProcessor {
 public:
  WrapProcessor(std::vector<int32_t> prefix, std::vector<int32_t> suffix)
      : prefix_(std::move(prefix)), suffix_(std::move(suffix)) {}
  std::vector<int32_t> Prefix() const override { return prefix_; }
  std::vector<int32_t> Suffix() const override { return suffix_; }

 private:
  std::vector<int32_t> prefix_, suffix_;
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> s) : stages_(std::move(s)) {}
  std::vector<int32_t> Prefix() const override {
    std::vector<int32_t> p;
    for (const auto& s : stages_) {
      auto x = s->Prefix();
      p.insert(p.begin(), x.begin(), x.end());
    }
    return p;
  }
  std::vector<int32_t> Suffix() const override {
    std::vector<int32_t> p;
    for (const auto& s : stages_) {
      auto x = s->Suffix();
      p.insert(p.end(), x.begin(), x.end());
    }
    return p;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> stages_;
};

StatusOr<std::vector<int32_t>> SpecialIds(const json& specials, const std::string& name) {
  if (!specials.is_object() || !specials.contains(name) || !specials[name].contains("ids")) {
    return InvalidArgument(fmt::format("tokenizer: TemplateProcessing uses special token '{}' but its "
                                       "special_tokens has no ids for it", name));
  }
  return specials[name]["ids"].get<std::vector<int32_t>>();
}

}  // namespace

StatusOr<std::unique_ptr<PostProcessor>> MakePostProcessor(const json& j) {
  using Ptr = std::unique_ptr<PostProcessor>;
  if (j.is_null()) return Ptr();
  const std::string type = j.value("type", "");
  if (type == "ByteLevel") return Ptr();  // only offsets change
  if (type == "TemplateProcessing") {
    std::vector<int32_t> prefix, suffix;
    bool seen_sequence = false;
    for (const json& item : j.value("single", json::array())) {
      if (item.contains("Sequence")) {
        if (item["Sequence"].value("id", "A") != "A") {
          return InvalidArgument("tokenizer: TemplateProcessing single template uses a sequence other than A");
        }
        seen_sequence = true;
      } else if (item.contains("SpecialToken")) {
        HT_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                            SpecialIds(j.value("special_tokens", json()), item["SpecialToken"].value("id", "")));
        auto& dst = seen_sequence ? suffix : prefix;
        dst.insert(dst.end(), ids.begin(), ids.end());
      } else {
        return InvalidArgument(fmt::format("tokenizer: TemplateProcessing item {} is neither Sequence nor SpecialToken", item.dump()));
      }
    }
    return Ptr(new WrapProcessor(std::move(prefix), std::move(suffix)));
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    const json cls = j.value("cls", json()), sep = j.value("sep", json());
    if (!cls.is_array() || cls.size() != 2 || !sep.is_array() || sep.size() != 2) {
      return InvalidArgument(fmt::format("tokenizer: {} needs cls and sep as [token, id]", type));
    }
    return Ptr(new WrapProcessor({cls[1].get<int32_t>()}, {sep[1].get<int32_t>()}));
  }
  if (type == "Sequence") {
    std::vector<Ptr> stages;
    for (const json& s : j.value("processors", json::array())) {
      HT_ASSIGN_OR_RETURN(Ptr p, MakePostProcessor(s));
      if (p) stages.push_back(std::move(p));
    }
    return Ptr(new SequenceProcessor(std::move(stages)));
  }
  return InvalidArgument(fmt::format(
      "tokenizer: post-processor type '{}' is not supported (supported: TemplateProcessing, ByteLevel, "
      "Sequence, BertProcessing, RobertaProcessing)",
      type.empty() ? j.dump() : type));
}

}  // namespace hypertrain::tokenizer
