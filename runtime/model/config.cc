#include "runtime/model/config.h"

#include <fmt/format.h>

#include <optional>

#include "contract/estimate.h"

namespace hypertrain::model {
namespace {

// Upper bounds far above any Llama (405B: hidden 16384, 126 layers, 128
// heads, FFN 53248, vocab 128256, 128k context) that keep every size the
// trainer and the memory plan compute within int64 (and token ids in int32).
constexpr int64_t kMaxVocab = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxHidden = int64_t{1} << 16;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxIntermediate = int64_t{1} << 18;
constexpr int64_t kMaxContextWidth = int64_t{1} << 20;

Status Positive(const char* key, int64_t v, int64_t max) {
  if (v <= 0) return InvalidArgument(fmt::format("model.{} must be > 0, got {}", key, v));
  if (v > max) return InvalidArgument(fmt::format("model.{} must be <= {}, got {}", key, max, v));
  return Status::Ok();
}

}  // namespace

Status ModelConfig::Validate() const {
  HT_RETURN_IF_ERROR(Positive("vocab_size", vocab_size, kMaxVocab));
  HT_RETURN_IF_ERROR(Positive("hidden_size", hidden_size, kMaxHidden));
  HT_RETURN_IF_ERROR(Positive("num_hidden_layers", num_hidden_layers, kMaxLayers));
  HT_RETURN_IF_ERROR(Positive("num_attention_heads", num_attention_heads, kMaxHeads));
  HT_RETURN_IF_ERROR(Positive("num_key_value_heads", num_key_value_heads, kMaxHeads));
  HT_RETURN_IF_ERROR(Positive("intermediate_size", intermediate_size, kMaxIntermediate));
  HT_RETURN_IF_ERROR(Positive("max_context_width", max_context_width, kMaxContextWidth));
  if (hidden_size % num_attention_heads != 0) {
    return InvalidArgument(fmt::format(
        "model.num_attention_heads ({}) must divide model.hidden_size ({})",
        num_attention_heads, hidden_size));
  }
  if (num_attention_heads % num_key_value_heads != 0) {
    return InvalidArgument(fmt::format(
        "model.num_key_value_heads ({}) must divide model.num_attention_heads ({})",
        num_key_value_heads, num_attention_heads));
  }
  if (head_dim() % 2 != 0) {
    return InvalidArgument(fmt::format(
        "head dim hidden_size/num_attention_heads = {} must be even for RoPE", head_dim()));
  }
  if (!(rope_theta > 0)) {
    return InvalidArgument(fmt::format("model.rope_theta must be > 0, got {}", rope_theta));
  }
  if (!(rms_norm_eps > 0)) {
    return InvalidArgument(fmt::format("model.rms_norm_eps must be > 0, got {}", rms_norm_eps));
  }
  if (rope_scaling.type == RopeScalingType::kLlama3) {
    const RopeScaling& s = rope_scaling;
    if (!(s.factor >= 1)) {
      return InvalidArgument(fmt::format("model.rope_scaling.factor must be >= 1, got {}", s.factor));
    }
    if (!(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor)) {
      return InvalidArgument(fmt::format(
          "model.rope_scaling needs 0 < low_freq_factor < high_freq_factor, got {} and {}",
          s.low_freq_factor, s.high_freq_factor));
    }
    if (s.original_max_position_embeddings <= 0) {
      return InvalidArgument("model.rope_scaling.original_max_position_embeddings must be > 0");
    }
  }
  return Status::Ok();
}

int64_t ModelConfig::BlockParams() const {
  const int64_t h = hidden_size;
  return 2 * h                                 // input/post-attention RMSNorm
         + h * q_dim() + 2 * h * kv_dim()      // q, k, v
         + q_dim() * h                         // o
         + 3 * h * intermediate_size;          // gate, up, down
}

int64_t ModelConfig::EmbeddingUnitParams() const {
  return vocab_size * hidden_size + hidden_size +
         (tie_word_embeddings ? 0 : vocab_size * hidden_size);
}

int64_t ModelConfig::NumParams() const {
  return num_hidden_layers * BlockParams() + EmbeddingUnitParams();
}

int64_t ModelConfig::NumMatmulParams() const {
  return num_hidden_layers * (BlockParams() - 2 * hidden_size) + vocab_size * hidden_size;
}

double ModelConfig::TrainFlopsPerToken(int64_t seq) const {
  return 6.0 * static_cast<double>(NumMatmulParams()) +
         12.0 * static_cast<double>(num_hidden_layers) * hidden_size * static_cast<double>(seq);
}

double ModelConfig::MegatronFlopsPerIteration(int64_t batch, int64_t seq) const {
  const double B = batch, s = seq, l = num_hidden_layers, h = hidden_size, V = vocab_size;
  return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

std::string ModelConfig::Summary() const {
  return fmt::format(
      "vocab={} hidden={} layers={} heads={}/{} ffn={} ctx={} theta={} scaling={} tied={} "
      "params={:.2f}M",
      vocab_size, hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
      intermediate_size, max_context_width, rope_theta,
      rope_scaling.type == RopeScalingType::kLlama3 ? "llama3" : "none", tie_word_embeddings,
      NumParams() / 1e6);
}

std::vector<std::string> NamedModelConfigNames() { return contract::NamedModelShapeNames(); }

StatusOr<ModelConfig> NamedModelConfig(std::string_view name) {
  const std::optional<contract::NamedShape> named = contract::NamedModelShape(std::string(name));
  if (!named.has_value()) {
    return InvalidArgument(fmt::format("unknown model name '{}'; accepted: {}", name,
                                       fmt::join(NamedModelConfigNames(), ", ")));
  }
  // The shape fields come from the contract's table, the one list of them.
  ModelConfig c;
  static_cast<contract::ModelShape&>(c) = named->model;
  c.max_context_width = named->max_context_width;
  // Runtime-only fields: the RoPE of the Llama-3 checkpoints 1b and 8b are
  // (Llama-3.2-1B and Llama-3.1-8B config.json); tiny and 125m keep the defaults.
  if (name == "1b") {
    c.rope_theta = 500000.0;
    c.rope_scaling = {RopeScalingType::kLlama3, 32.0, 1.0, 4.0, 8192};
  } else if (name == "8b") {
    c.rope_theta = 500000.0;
    c.rope_scaling = {RopeScalingType::kLlama3, 8.0, 1.0, 4.0, 8192};
  }
  c.rms_norm_eps = 1e-5;
  return c;
}

}  // namespace hypertrain::model
