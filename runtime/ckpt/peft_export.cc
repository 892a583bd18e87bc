#include "runtime/ckpt/peft_export.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/atomic_file.h"
#include "runtime/ckpt/hf_export.h"

namespace hypertrain::ckpt {

using json = nlohmann::json;

json AdapterConfigJson(const model::PeftOptions& o, const std::string& base_model) {
  json targets = json::array();
  for (int t : o.targets) targets.push_back(model::TargetModuleName(t));
  return {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", base_model.empty() ? json(nullptr) : json(base_model)},
      {"r", o.rank},
      {"lora_alpha", o.alpha},
      {"lora_dropout", o.dropout},
      {"target_modules", targets},
      {"bias", "none"},
      {"fan_in_fan_out", false},
      {"inference_mode", true},
      {"init_lora_weights", true},
      {"use_rslora", false},
      {"use_dora", false},
      {"modules_to_save", nullptr},
      {"layers_to_transform", nullptr},
      {"layers_pattern", nullptr},
      {"rank_pattern", json::object()},
      {"alpha_pattern", json::object()},
      {"revision", nullptr},
  };
}

Status ExportAdapter(const model::ParamLayout& adapters, const model::PeftOptions& o,
                     const std::string& base_model, const std::string& dir,
                     const std::function<Status(int unit, float* dst)>& read_unit) {
  HT_RETURN_IF_ERROR(MakeDirs(dir));
  // One unit in memory at a time: the writer asks for tensors in order.
  struct Cache {
    int unit = -1;
    std::vector<float> values;
  };
  auto cache = std::make_shared<Cache>();
  std::vector<StTensorOut> out;
  for (const model::UnitLayout& u : adapters.units()) {
    for (const model::TensorSlot& t : u.tensors) {
      const int unit = u.index;
      const int64_t padded = u.padded_numel;
      out.push_back({t.name, t.shape, [=, &read_unit](float* dst) -> Status {
                       if (cache->unit != unit) {
                         cache->values.assign(padded, 0.0f);
                         HT_RETURN_IF_ERROR(read_unit(unit, cache->values.data()));
                         cache->unit = unit;
                       }
                       std::copy(cache->values.begin() + t.offset,
                                 cache->values.begin() + t.offset + t.numel, dst);
                       return Status::Ok();
                     }});
    }
  }
  HT_RETURN_IF_ERROR(WriteSafetensors(dir + "/adapter_model.safetensors", StDType::kF32, out,
                                      {{"format", "pt"}}));
  return WriteFileAtomically(dir + "/adapter_config.json",
                             AdapterConfigJson(o, base_model).dump(2) + "\n");
}

std::pair<const LoadedAdapter::Matrix*, const LoadedAdapter::Matrix*> LoadedAdapter::ForWeight(
    const std::string& base_name) const {
  const std::string suffix = ".weight";
  if (base_name.size() <= suffix.size()) return {nullptr, nullptr};
  const std::string module = "base_model.model." + base_name.substr(0, base_name.size() - suffix.size());
  auto a = tensors.find(module + ".lora_A.weight");
  auto b = tensors.find(module + ".lora_B.weight");
  if (a == tensors.end() || b == tensors.end()) return {nullptr, nullptr};
  return {&a->second, &b->second};
}

StatusOr<LoadedAdapter> LoadAdapter(const std::string& dir) {
  const std::string cfg_path = dir + "/adapter_config.json";
  HT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(cfg_path));
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return DataLoss(cfg_path + " is not a JSON object");
  LoadedAdapter a;
  try {
    if (j.value("peft_type", std::string()) != "LORA") {
      return InvalidArgument(cfg_path + ": peft_type " + j.value("peft_type", std::string("?")) +
                             " is not LORA");
    }
    a.options.type = model::PeftType::kLora;
    a.options.rank = j.at("r").get<int64_t>();
    a.options.alpha = j.at("lora_alpha").get<double>();
    a.options.dropout = j.value("lora_dropout", 0.0);
    if (j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string()) {
      a.base_model = j["base_model_name_or_path"].get<std::string>();
    }
    if (j.value("use_dora", false) || j.value("use_rslora", false) ||
        j.value("fan_in_fan_out", false) || j.value("bias", std::string("none")) != "none" ||
        (j.contains("rank_pattern") && !j["rank_pattern"].empty()) ||
        (j.contains("alpha_pattern") && !j["alpha_pattern"].empty())) {
      return InvalidArgument(cfg_path + ": only plain LoRA (no DoRA, rsLoRA, biases, "
                             "fan_in_fan_out or per-module rank/alpha patterns) is supported");
    }
    std::vector<int> targets;
    for (const auto& t : j.at("target_modules")) {
      HT_ASSIGN_OR_RETURN(int x, model::ParseTargetModule(t.get<std::string>()));
      targets.push_back(x);
    }
    std::sort(targets.begin(), targets.end());
    a.options.targets = targets;
  } catch (const std::exception& e) {
    return DataLoss(cfg_path + ": missing or mistyped field: " + e.what());
  }
  HT_RETURN_IF_ERROR(a.options.Validate());
  HT_ASSIGN_OR_RETURN(SafetensorsReader r, SafetensorsReader::Open(dir + "/adapter_model.safetensors"));
  for (const StTensorInfo& t : r.tensors()) {
    const bool is_a = t.name.find(".lora_A.") != std::string::npos;
    const bool is_b = t.name.find(".lora_B.") != std::string::npos;
    if (!is_a && !is_b) {
      return InvalidArgument(r.path() + ": tensor " + t.name + " is not a LoRA matrix");
    }
    if (t.shape.size() != 2 || t.shape[is_a ? 0 : 1] != a.options.rank) {
      return DataLoss(fmt::format("{}: {} has shape [{}] but r is {}", r.path(), t.name,
                                  fmt::join(t.shape, ", "), a.options.rank));
    }
    // PEFT saves without the adapter name; an older ".default" infix is accepted.
    std::string name = t.name;
    const size_t d = name.find(".default.");
    if (d != std::string::npos) name.erase(d, 8);
    LoadedAdapter::Matrix m;
    m.shape = t.shape;
    m.values.resize(t.numel());
    HT_RETURN_IF_ERROR(r.ReadF32(t, 0, t.numel(), m.values.data()));
    a.tensors.emplace(name, std::move(m));
  }
  return a;
}

void AddLoraDelta(float* dst, const LoadedAdapter::Matrix& a, const LoadedAdapter::Matrix& b,
                  double scaling) {
  const int64_t r = a.shape[0], in = a.shape[1], out = b.shape[0];
  std::vector<double> row(in);
  for (int64_t o = 0; o < out; ++o) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t k = 0; k < r; ++k) {
      const double bk = b.values[o * r + k];
      const float* ak = a.values.data() + k * in;
      for (int64_t i = 0; i < in; ++i) row[i] += bk * ak[i];
    }
    for (int64_t i = 0; i < in; ++i) dst[o * in + i] = static_cast<float>(dst[o * in + i] + scaling * row[i]);
  }
}

Status ExportMerged(const ModelLayoutDesc& base_layout, const model::ModelConfig& config,
                    const LoadedAdapter& adapter, const std::string& out_dir, StDType dtype,
                    const std::function<Status(const TensorEntry&, float*)>& base, const HfBase& hf_base) {
  // Every adapter matrix must land on a base weight of the right shape.
  int matched = 0;
  for (const UnitEntry& u : base_layout.units) {
    for (const TensorEntry& t : u.tensors) {
      auto [a, b] = adapter.ForWeight(t.name);
      if (a == nullptr) continue;
      if (t.shape.size() != 2 || a->shape[1] != t.shape[1] || b->shape[0] != t.shape[0]) {
        return InvalidArgument(fmt::format("adapter for {} does not fit its shape [{}]", t.name,
                                           fmt::join(t.shape, ", ")));
      }
      matched += 2;
    }
  }
  if (matched != static_cast<int>(adapter.tensors.size())) {
    return InvalidArgument(fmt::format("{} of the adapter's {} matrices belong to no weight of "
                                       "this model",
                                       adapter.tensors.size() - matched, adapter.tensors.size()));
  }
  const double s = adapter.options.scaling();
  return ExportHf(base_layout, config, out_dir, dtype, [&](const TensorEntry& t, float* dst) {
    HT_RETURN_IF_ERROR(base(t, dst));
    auto [a, b] = adapter.ForWeight(t.name);
    if (a != nullptr) AddLoraDelta(dst, *a, *b, s);
    return Status::Ok();
  }, hf_base);
}

}  // namespace hypertrain::ckpt
