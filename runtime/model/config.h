#pragma once
// ModelConfig: the shape of a Llama-3 decoder, shared by every backend.
//
// The shape fields (vocab, hidden, layers, heads, kv heads, intermediate,
// tied embedding) are contract::ModelShape's, declared once for the operator
// and the trainer; ModelConfig adds what only the trainer needs (context,
// RoPE, norm epsilon). Field names follow Hugging Face's LlamaConfig
// (config.json) so that a HyperPod recipe's `model:` block and an exported
// config.json use the same words. Named shapes: "tiny" (CPU tests/quickstart),
// "125m", "1b" (exactly Llama-3.2-1B) and "8b" (Llama-3.1-8B).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "contract/model_shape.h"
#include "core/status.h"

namespace hypertrain::model {

enum class RopeScalingType { kNone, kLlama3 };

// rope_scaling of HF config.json (rope_type "llama3").
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig : contract::ModelShape {
  int64_t max_context_width = 0;  // sequence length trained at
  // config.json's max_position_embeddings (the context the model is meant
  // for, e.g. 131072 for Llama-3.1); 0 = max_context_width. Export only.
  int64_t max_position_embeddings = 0;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double rms_norm_eps = 1e-5;

  // InvalidArgument naming the field (e.g. "model.num_key_value_heads (3) must
  // divide model.num_attention_heads (8)") or Ok.
  Status Validate() const;

  // Parameters of one transformer block (2 norms + q,k,v,o + gate,up,down).
  int64_t BlockParams() const;
  // Embedding + final norm + untied LM head.
  int64_t EmbeddingUnitParams() const;
  // All trainable parameters (tied embedding counted once).
  int64_t NumParams() const;
  // Parameters that take part in a matmul per token: all block projections
  // plus the LM head (vocab x hidden, counted even when tied). Excludes norms
  // and the embedding lookup.
  int64_t NumMatmulParams() const;
  // Model FLOPs per token for training (forward+backward, no recompute):
  // 6 * NumMatmulParams() + 12 * layers * hidden * seq   (PaLM / torchtitan).
  double TrainFlopsPerToken(int64_t seq) const;
  // Megatron's formula (Narayanan et al. 2021) for one iteration of batch B
  // with full recompute: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)). Printed for
  // comparison only; it assumes a 4h GPT MLP and is not used for MFU.
  double MegatronFlopsPerIteration(int64_t batch, int64_t seq) const;

  std::string Summary() const;  // one line for logs
};

// Named shapes. Returns InvalidArgument listing the names for unknown ones.
StatusOr<ModelConfig> NamedModelConfig(std::string_view name);
std::vector<std::string> NamedModelConfigNames();

}  // namespace hypertrain::model
