#pragma once
// Hugging Face interop in the transformers Llama layout.
//
// Export writes <out>/config.json (LlamaConfig fields, architectures
// ["LlamaForCausalLM"]) and <out>/model.safetensors holding every tensor of
// the layout by its HF name (model.embed_tokens.weight,
// model.layers.N.self_attn.{q,k,v,o}_proj.weight,
// model.layers.N.mlp.{gate,up,down}_proj.weight,
// model.layers.N.{input,post_attention}_layernorm.weight, model.norm.weight,
// and lm_head.weight only when embeddings are untied), as BF16 or F32.
// Tensors are copied as they are: the trainer stores q/k in HF's rotate-half
// RoPE order and Linear weights as [out, in] (runtime/model/layout.h), so no
// permutation or transpose is involved.
//
// Import (model.hf_init_dir) reads config.json, checks that it describes the
// configured model, and fills the master weights of any owned range of any
// unit from model.safetensors, or from the shards listed in
// model.safetensors.index.json. F32, BF16 and F16 files load (widened to
// fp32); with tied embeddings an lm_head.weight in the file is ignored.
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/ckpt/format.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/ckpt/store.h"
#include "core/status.h"
#include "runtime/model/config.h"

namespace hypertrain::ckpt {

// config.json of a ModelConfig; torch_dtype names the exported dtype.
nlohmann::json HfConfigJson(const model::ModelConfig& c, StDType dtype);

// The model an export descends from: config.json and generation_config.json
// of model.hf_model_name_or_path (or exp_manager.hf_init_from). Each null
// when there is none.
struct HfBase {
  nlohmann::json config;
  nlohmann::json generation;
};
// Reads <dir>/config.json (required) and <dir>/generation_config.json (if
// any); "" gives an empty HfBase. InvalidArgument naming the file.
StatusOr<HfBase> ReadHfBase(const std::string& dir);
// An export's config.json. With a base: the base's file as it is (its token
// ids, max_position_embeddings, rope_scaling or transformers 5's
// rope_parameters, transformers_version, ...), with architectures, model_type,
// the shape fields and the dtype (torch_dtype, or transformers 5's dtype)
// set from the trained model, so that it loads like the base. Without one:
// HfConfigJson.
nlohmann::json HfExportConfigJson(const model::ModelConfig& c, StDType dtype, const HfBase& base);
// generation_config.json: the base's as it is, else what transformers derives
// from config.json (_from_model_config, bos/eos/pad token ids when known).
nlohmann::json HfGenerationConfigJson(const nlohmann::json& config_json, const HfBase& base);
// ModelConfig from config.json (max_context_width <- max_position_embeddings).
StatusOr<model::ModelConfig> ModelConfigFromHf(const nlohmann::json& j);
// InvalidArgument listing every shape field where config.json and `c` differ.
Status CheckHfConfigMatches(const nlohmann::json& j, const model::ModelConfig& c);

// Exports from a verified checkpoint (master weights).
// Both write model.safetensors, config.json (HfExportConfigJson) and
// generation_config.json.
Status ExportHfFromCheckpoint(const CheckpointReader& reader, const model::ModelConfig& config,
                              const std::string& out_dir, StDType dtype, const HfBase& base = HfBase());

// Exports from tensors supplied by `fill(name, dst)` (e.g. a live model).
Status ExportHf(const ModelLayoutDesc& layout, const model::ModelConfig& config, const std::string& out_dir,
                StDType dtype, const std::function<Status(const TensorEntry&, float*)>& fill,
                const HfBase& base = HfBase());

class HfWeights {
 public:
  // Opens <dir>/config.json and its weights; checks config against `expect`.
  static StatusOr<HfWeights> Open(const std::string& dir, const model::ModelConfig& expect);
  HfWeights(HfWeights&&) noexcept = default;
  // Every tensor of the layout exists in the files with the right shape.
  Status CheckCovers(const ModelLayoutDesc& layout) const;
  // dst[i] = master weight of element range.begin + i of `unit` (0 in gaps).
  Status ReadRange(const UnitEntry& unit, ElemRange range, float* dst) const;
  const nlohmann::json& config() const { return config_; }

 private:
  HfWeights() = default;
  const StTensorInfo* Find(const std::string& name, const SafetensorsReader** file) const;
  std::string dir_;
  nlohmann::json config_;
  std::vector<std::unique_ptr<SafetensorsReader>> files_;
};

}  // namespace hypertrain::ckpt
