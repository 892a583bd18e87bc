#include "runtime/ckpt/hf_export.h"

#include <set>
#include <tuple>

namespace hypertrain::ckpt {
namespace {

using json = nlohmann::json;

}  // namespace

json HfConfigJson(const model::ModelConfig& c, StDType dtype) {
  json j = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim()},
      {"max_position_embeddings", c.max_position_embeddings > 0 ? c.max_position_embeddings : c.max_context_width},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"mlp_bias", false},
      {"initializer_range", 0.02},
      {"use_cache", true},
      {"torch_dtype", dtype == StDType::kBF16 ? "bfloat16" : "float32"},
  };
  if (c.rope_scaling.type == model::RopeScalingType::kLlama3) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling.factor},
                         {"low_freq_factor", c.rope_scaling.low_freq_factor},
                         {"high_freq_factor", c.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  return j;
}

StatusOr<HfBase> ReadHfBase(const std::string& dir) {
  HfBase b;
  if (dir.empty()) return b;
  for (auto [name, out, required] : {std::tuple{"config.json", &b.config, true},
                                     std::tuple{"generation_config.json", &b.generation, false}}) {
    const std::string path = dir + "/" + name;
    StatusOr<std::string> text = ReadFileToString(path);
    if (!text.ok()) {
      if (!required && text.status().code() == StatusCode::kNotFound) continue;
      return InvalidArgument(path + ": " + text.status().message());
    }
    *out = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!out->is_object()) return InvalidArgument(path + " is not a JSON object");
  }
  return b;
}

json HfExportConfigJson(const model::ModelConfig& c, StDType dtype, const HfBase& base) {
  json own = HfConfigJson(c, dtype);
  if (!base.config.is_object()) return own;
  json j = base.config;
  const bool v5 = j.contains("rope_parameters");
  // What the trained model decides; the rest (token ids, the context the
  // base supports, its RoPE in its own format) stays the base's.
  for (const char* k : {"architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size",
                        "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "rms_norm_eps",
                        "tie_word_embeddings"}) {
    j[k] = own[k];
  }
  if (j.contains("head_dim")) j["head_dim"] = own["head_dim"];
  if (!v5) {
    j["rope_theta"] = own["rope_theta"];
    if (!j.contains("rope_scaling")) j["rope_scaling"] = own["rope_scaling"];
  }
  const char* dtype_key = j.contains("dtype") || (v5 && !j.contains("torch_dtype")) ? "dtype" : "torch_dtype";
  j[dtype_key] = own["torch_dtype"];
  return j;
}

json HfGenerationConfigJson(const json& config_json, const HfBase& base) {
  if (base.generation.is_object()) return base.generation;
  json g = {{"_from_model_config", true}};
  for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    if (config_json.contains(k) && !config_json[k].is_null()) g[k] = config_json[k];
  }
  if (config_json.contains("transformers_version")) g["transformers_version"] = config_json["transformers_version"];
  return g;
}

StatusOr<model::ModelConfig> ModelConfigFromHf(const json& j) {
  model::ModelConfig c;
  try {
    if (j.contains("model_type") && j["model_type"] != "llama") {
      return InvalidArgument("config.json model_type is " + j["model_type"].dump() + ", only llama is supported");
    }
    c.vocab_size = j.at("vocab_size").get<int64_t>();
    c.hidden_size = j.at("hidden_size").get<int64_t>();
    c.intermediate_size = j.at("intermediate_size").get<int64_t>();
    c.num_hidden_layers = j.at("num_hidden_layers").get<int64_t>();
    c.num_attention_heads = j.at("num_attention_heads").get<int64_t>();
    c.num_key_value_heads = j.value("num_key_value_heads", c.num_attention_heads);
    c.max_context_width = j.value("max_position_embeddings", int64_t{2048});
    c.max_position_embeddings = c.max_context_width;
    c.rms_norm_eps = j.value("rms_norm_eps", 1e-6);
    c.rope_theta = j.value("rope_theta", 10000.0);
    c.tie_word_embeddings = j.value("tie_word_embeddings", false);  // transformers' LlamaConfig default
    if (j.contains("head_dim") && !j["head_dim"].is_null() &&
        j["head_dim"].get<int64_t>() != c.hidden_size / c.num_attention_heads) {
      return InvalidArgument("config.json head_dim != hidden_size / num_attention_heads is not supported");
    }
    // transformers 4.x: rope_theta + rope_scaling; 5.x: rope_parameters
    // {rope_type, rope_theta, factor, ...} (rope_type "default": no scaling).
    const bool v5 = j.contains("rope_parameters") && j["rope_parameters"].is_object();
    const json none;
    const json& r = v5 ? j["rope_parameters"] : j.contains("rope_scaling") ? j["rope_scaling"] : none;
    if (v5) {
      if (!r.contains("rope_theta") && !r.contains("rope_type")) {
        return InvalidArgument("config.json rope_parameters is keyed by layer type; a Llama has one RoPE");
      }
      c.rope_theta = r.value("rope_theta", c.rope_theta);
    }
    if (r.is_object()) {
      const std::string type = r.value("rope_type", r.value("type", std::string(v5 ? "default" : "")));
      if (type == "llama3") {
        c.rope_scaling.type = model::RopeScalingType::kLlama3;
        c.rope_scaling.factor = r.value("factor", 8.0);
        c.rope_scaling.low_freq_factor = r.value("low_freq_factor", 1.0);
        c.rope_scaling.high_freq_factor = r.value("high_freq_factor", 4.0);
        c.rope_scaling.original_max_position_embeddings = r.value("original_max_position_embeddings", int64_t{8192});
      } else if (type != "default") {
        return InvalidArgument("config.json " + std::string(v5 ? "rope_parameters" : "rope_scaling") + " type '" +
                               type + "' is not supported (llama3 or default)");
      }
    }
    if (j.value("attention_bias", false) || j.value("mlp_bias", false)) {
      return InvalidArgument("config.json asks for biases; this Llama implementation has none");
    }
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("config.json: missing or mistyped field: ") + e.what());
  }
  HT_RETURN_IF_ERROR(c.Validate());
  return c;
}

Status CheckHfConfigMatches(const json& j, const model::ModelConfig& want) {
  HT_ASSIGN_OR_RETURN(model::ModelConfig got, ModelConfigFromHf(j));
  std::string diff;
  auto cmp = [&](const char* name, auto a, auto b) {
    if (a != b) diff += std::string(diff.empty() ? "" : ", ") + name + " " + std::to_string(a) + " vs " + std::to_string(b);
  };
  cmp("vocab_size", got.vocab_size, want.vocab_size);
  cmp("hidden_size", got.hidden_size, want.hidden_size);
  cmp("intermediate_size", got.intermediate_size, want.intermediate_size);
  cmp("num_hidden_layers", got.num_hidden_layers, want.num_hidden_layers);
  cmp("num_attention_heads", got.num_attention_heads, want.num_attention_heads);
  cmp("num_key_value_heads", got.num_key_value_heads, want.num_key_value_heads);
  cmp("tie_word_embeddings", static_cast<int>(got.tie_word_embeddings), static_cast<int>(want.tie_word_embeddings));
  cmp("rope_theta", got.rope_theta, want.rope_theta);
  cmp("rms_norm_eps", got.rms_norm_eps, want.rms_norm_eps);
  cmp("rope_scaling", static_cast<int>(got.rope_scaling.type), static_cast<int>(want.rope_scaling.type));
  if (got.rope_scaling.type == model::RopeScalingType::kLlama3 && want.rope_scaling.type == got.rope_scaling.type) {
    cmp("rope_scaling.factor", got.rope_scaling.factor, want.rope_scaling.factor);
    cmp("rope_scaling.low_freq_factor", got.rope_scaling.low_freq_factor, want.rope_scaling.low_freq_factor);
    cmp("rope_scaling.high_freq_factor", got.rope_scaling.high_freq_factor, want.rope_scaling.high_freq_factor);
    cmp("rope_scaling.original_max_position_embeddings", got.rope_scaling.original_max_position_embeddings,
        want.rope_scaling.original_max_position_embeddings);
  }
  if (!diff.empty()) return InvalidArgument("config.json does not match the configured model (file vs config): " + diff);
  return Status::Ok();
}

Status ExportHf(const ModelLayoutDesc& layout, const model::ModelConfig& config, const std::string& out_dir,
                StDType dtype, const std::function<Status(const TensorEntry&, float*)>& fill, const HfBase& base) {
  HT_RETURN_IF_ERROR(MakeDirs(out_dir));
  std::vector<StTensorOut> out;
  for (const UnitEntry& u : layout.units) {
    for (const TensorEntry& t : u.tensors) {
      out.push_back({t.name, t.shape, [&fill, t](float* dst) { return fill(t, dst); }});
    }
  }
  HT_RETURN_IF_ERROR(WriteSafetensors(out_dir + "/model.safetensors", dtype, out, {{"format", "pt"}}));
  const json cfg = HfExportConfigJson(config, dtype, base);
  HT_RETURN_IF_ERROR(WriteFileAtomically(out_dir + "/generation_config.json",
                                         HfGenerationConfigJson(cfg, base).dump(2) + "\n"));
  return WriteFileAtomically(out_dir + "/config.json", cfg.dump(2) + "\n");
}

Status ExportHfFromCheckpoint(const CheckpointReader& reader, const model::ModelConfig& config,
                              const std::string& out_dir, StDType dtype, const HfBase& base) {
  return ExportHf(
      reader.manifest().layout, config, out_dir, dtype,
      [&reader](const TensorEntry& t, float* dst) { return reader.ReadTensor(t.name, 0, dst); }, base);
}

StatusOr<HfWeights> HfWeights::Open(const std::string& dir, const model::ModelConfig& expect) {
  HfWeights w;
  w.dir_ = dir;
  StatusOr<std::string> cfg = ReadFileToString(dir + "/config.json");
  if (!cfg.ok()) {
    return Status(cfg.status().code(), dir + " is not a Hugging Face model directory: " + cfg.status().message());
  }
  w.config_ = json::parse(*cfg, nullptr, false);
  if (w.config_.is_discarded()) return InvalidArgument(dir + "/config.json is not valid JSON");
  HT_RETURN_IF_ERROR(CheckHfConfigMatches(w.config_, expect));
  std::vector<std::string> files;
  StatusOr<std::string> index = ReadFileToString(dir + "/model.safetensors.index.json");
  if (index.ok()) {
    json ij = json::parse(*index, nullptr, false);
    if (ij.is_discarded() || !ij.contains("weight_map") || !ij["weight_map"].is_object()) {
      return DataLoss(dir + "/model.safetensors.index.json has no weight_map object");
    }
    std::set<std::string> unique;
    for (auto it = ij["weight_map"].begin(); it != ij["weight_map"].end(); ++it) {
      const std::string f = it->get<std::string>();
      if (f.find('/') != std::string::npos) return DataLoss("weight_map names a file outside the directory: " + f);
      unique.insert(f);
    }
    files.assign(unique.begin(), unique.end());
  } else {
    files.push_back("model.safetensors");
  }
  for (const std::string& f : files) {
    HT_ASSIGN_OR_RETURN(SafetensorsReader r, SafetensorsReader::Open(dir + "/" + f));
    w.files_.push_back(std::make_unique<SafetensorsReader>(std::move(r)));
  }
  return w;
}

const StTensorInfo* HfWeights::Find(const std::string& name, const SafetensorsReader** file) const {
  for (const auto& f : files_) {
    if (const StTensorInfo* t = f->Find(name)) {
      *file = f.get();
      return t;
    }
  }
  return nullptr;
}

Status HfWeights::CheckCovers(const ModelLayoutDesc& layout) const {
  for (const UnitEntry& u : layout.units) {
    for (const TensorEntry& t : u.tensors) {
      const SafetensorsReader* f = nullptr;
      const StTensorInfo* info = Find(t.name, &f);
      if (info == nullptr) return NotFound(dir_ + ": no tensor " + t.name + " in the safetensors files");
      if (info->shape != t.shape) {
        return InvalidArgument(dir_ + ": tensor " + t.name + " has shape " + json(info->shape).dump() + ", the model needs " +
                               json(t.shape).dump());
      }
    }
  }
  return Status::Ok();
}

Status HfWeights::ReadRange(const UnitEntry& unit, ElemRange range, float* dst) const {
  std::fill(dst, dst + range.size(), 0.0f);
  for (const TensorEntry& t : unit.tensors) {
    const ElemRange want = IntersectRanges(range, {t.offset, t.offset + t.numel});
    if (want.size() <= 0) continue;
    const SafetensorsReader* f = nullptr;
    const StTensorInfo* info = Find(t.name, &f);
    if (info == nullptr || info->numel() != t.numel) return NotFound(dir_ + ": no tensor " + t.name + " of the right size");
    HT_RETURN_IF_ERROR(f->ReadF32(*info, want.begin - t.offset, want.size(), dst + (want.begin - range.begin)));
  }
  return Status::Ok();
}

}  // namespace hypertrain::ckpt
