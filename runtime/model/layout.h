#pragma once
// ParamLayout: the memory layout of the model, which is also the sharding
// unit.
//
// The parameters are split into UNITS. Unit 0 is the embedding unit
// (`model.embed_tokens.weight`, `model.norm.weight`, and `lm_head.weight` when
// untied); units 1..L are transformer blocks 0..L-1. Each unit is ONE
// contiguous flat fp32 buffer; its gradients and AdamW m/v are flat buffers of
// the same size with the same offsets. The optimizer, grad-norm and clipping
// work on flat ranges [begin, end) of units, so a sharder (HSDP) only changes
// which range of each unit a rank owns.
//
// Inside a unit, tensors are stored row-major in Hugging Face's shapes and
// names (Linear weights are [out_features, in_features], y = x W^T), so a
// safetensors export is a per-tensor copy. Block order:
//   input_layernorm [C], q_proj [H*D, C], k_proj [KV*D, C], v_proj [KV*D, C],
//   o_proj [C, H*D], post_attention_layernorm [C], gate_proj [F, C],
//   up_proj [F, C], down_proj [C, F].
// Embedding unit order: embed_tokens [V, C], norm [C], lm_head [V, C] (untied).
//
// RoPE layout: q/k use HF's rotate-half convention: within a head of dim D,
// element i (i < D/2) pairs with element i + D/2 and rotates by angle
// pos * inv_freq[i]. HF checkpoints import without permutation.
//
// Each tensor's offset is aligned to `tensor_alignment` elements (zero gaps
// in between) so CUDA kernels may use vector loads; each unit's numel is then
// padded up to a multiple of `pad_multiple` (a sharder asks for its shard
// count, times an alignment of its own if it wants). Gaps and padding hold
// zeros, get zero gradients and stay zero under AdamW.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/config.h"

namespace hypertrain::model {

// A half-open element range [begin, end) inside one unit.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
};

// Intersection of two ranges (empty when disjoint).
Range Intersect(const Range& a, const Range& b);

enum class TensorKind {
  kEmbedding,  // [V, C]
  kNorm,       // [C]
  kLinear,     // [out, in]
  kLoraA,      // [rank, in]  (runtime/model/peft.h)
  kLoraB,      // [out, rank]
};

struct TensorSlot {
  std::string name;            // HF name, e.g. "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // HF shape
  int64_t offset = 0;          // element offset inside its unit
  int64_t numel = 0;
  TensorKind kind = TensorKind::kLinear;
  bool weight_decay = true;    // false for norms
  Range range() const { return {offset, offset + numel}; }
};

// Tensor indices inside a block unit (the order above).
enum BlockTensor : int {
  kInputNorm = 0,
  kQProj,
  kKProj,
  kVProj,
  kOProj,
  kPostNorm,
  kGateProj,
  kUpProj,
  kDownProj,
  kNumBlockTensors,
};
// Tensor indices inside the embedding unit; kLmHead exists only when untied.
enum EmbedTensor : int { kEmbedTokens = 0, kFinalNorm = 1, kLmHead = 2 };

struct UnitLayout {
  int index = 0;
  std::string name;  // "embedding" or "layers.N"
  std::vector<TensorSlot> tensors;
  int64_t numel = 0;         // end of the last tensor (before padding)
  int64_t padded_numel = 0;  // buffer size to allocate; multiple of pad_multiple
  // Ranges that get decoupled weight decay / that do not (norm weights); the
  // union of both is every tensor (gaps/padding belong to neither).
  std::vector<Range> decay_ranges;
  std::vector<Range> no_decay_ranges;
  // nullptr when absent.
  const TensorSlot* Find(const std::string& name) const;
};

struct LayoutOptions {
  int64_t tensor_alignment = 64;  // elements
  int64_t pad_multiple = 1;       // elements
};

class ParamLayout {
 public:
  ParamLayout() = default;
  // The config must be valid (Validate()); options must be >= 1.
  static StatusOr<ParamLayout> Build(const ModelConfig& config, const LayoutOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const LayoutOptions& options() const { return options_; }
  int num_units() const { return static_cast<int>(units_.size()); }
  const UnitLayout& unit(int u) const { return units_.at(u); }
  const std::vector<UnitLayout>& units() const { return units_; }
  static constexpr int kEmbeddingUnit = 0;
  static int BlockUnit(int layer) { return layer + 1; }
  // Sum of padded_numel over units.
  int64_t total_padded_numel() const;
  // Sum of tensor numels (== config.NumParams()).
  int64_t total_param_numel() const;
  // Every tensor of every unit in unit order (for checkpoint export).
  std::vector<std::pair<int, const TensorSlot*>> AllTensors() const;

  // LoRA adapters (runtime/model/peft.h) as a layout of their own, unit for
  // unit beside the model's: the embedding unit holds no tensor (padded to
  // pad_multiple, at least 1 element), block unit l+1 holds, for every target
  // projection t in block order (q, k, v, o, gate, up, down), t's lora_A
  // [rank, in_t] then lora_B [out_t, rank], named as PEFT saves them
  // ("base_model.model.model.layers.L.self_attn.q_proj.lora_A.weight").
  // `targets` are BlockTensor indices of projections, ascending, no repeats.
  static StatusOr<ParamLayout> BuildLora(const ModelConfig& config, int64_t rank,
                                         const std::vector<int>& targets,
                                         const LayoutOptions& options = {});

 private:
  ModelConfig config_;
  LayoutOptions options_;
  std::vector<UnitLayout> units_;
};

}  // namespace hypertrain::model
