#pragma once
// PEFT adapters on disk, as Hugging Face PEFT reads and writes them.
//
// An adapter directory holds adapter_config.json (peft_type "LORA", r,
// lora_alpha, lora_dropout, target_modules, base_model_name_or_path, ...) and
// adapter_model.safetensors with one F32 tensor per adapter matrix under
// PEFT's names ("base_model.model.model.layers.L.self_attn.q_proj.lora_A.weight"
// [r, in], "...lora_B.weight" [out, r]); PeftModel.from_pretrained loads it.
// QLoRA adapters are the same files (the NF4 base is a property of the base
// model, not of the adapter).
//
// Merging: W' = W + (lora_alpha / r) * B A for every adapted projection;
// every other tensor of the base is copied as it is.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "runtime/ckpt/format.h"
#include "runtime/ckpt/hf_export.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/model/config.h"
#include "runtime/model/layout.h"
#include "runtime/model/peft.h"

namespace hypertrain::ckpt {

nlohmann::json AdapterConfigJson(const model::PeftOptions& o, const std::string& base_model);

// Writes an adapter directory (atomically per file; the directory is
// created). `read_unit(u, dst)` fills adapter unit u's padded_numel fp32
// values (the trained master weights).
Status ExportAdapter(const model::ParamLayout& adapters, const model::PeftOptions& o,
                     const std::string& base_model, const std::string& dir,
                     const std::function<Status(int unit, float* dst)>& read_unit);

// An adapter directory read back (any PEFT LoRA adapter of a Llama model).
struct LoadedAdapter {
  model::PeftOptions options;
  std::string base_model;
  struct Matrix {
    std::vector<int64_t> shape;
    std::vector<float> values;
  };
  std::map<std::string, Matrix> tensors;  // by PEFT name
  // The base weight "model.layers.L.<module>.weight" with its lora_A/lora_B,
  // or nullptrs when that projection has no adapter.
  std::pair<const Matrix*, const Matrix*> ForWeight(const std::string& base_name) const;
};
// InvalidArgument / DataLoss naming the file and the problem (not a LoRA
// adapter, biases, DoRA/rsLoRA, fan_in_fan_out, per-module rank patterns,
// shapes that do not fit r).
StatusOr<LoadedAdapter> LoadAdapter(const std::string& dir);

// dst[out, in] += scaling * B[out, r] A[r, in] (fp64 accumulation).
void AddLoraDelta(float* dst, const LoadedAdapter::Matrix& a, const LoadedAdapter::Matrix& b,
                  double scaling);

// Exports base + adapter merged as a Hugging Face Llama directory (config.json,
// generation_config.json, model.safetensors in `dtype`). `base(t, dst)` fills a
// base tensor's fp32 values; `hf_base` is the base's HF files (hf_export.h).
Status ExportMerged(const ModelLayoutDesc& base_layout, const model::ModelConfig& config,
                    const LoadedAdapter& adapter, const std::string& out_dir, StDType dtype,
                    const std::function<Status(const TensorEntry&, float*)>& base, const HfBase& hf_base = HfBase());

}  // namespace hypertrain::ckpt
