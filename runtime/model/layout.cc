#include "runtime/model/layout.h"

#include <fmt/format.h>

#include <algorithm>

namespace hypertrain::model {
namespace {

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

class UnitBuilder {
 public:
  UnitBuilder(int index, std::string name, int64_t align) : align_(align) {
    unit_.index = index;
    unit_.name = std::move(name);
  }
  void Add(std::string name, std::vector<int64_t> shape, TensorKind kind) {
    TensorSlot t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.numel = 1;
    for (int64_t d : t.shape) t.numel *= d;
    t.offset = RoundUp(cursor_, align_);
    t.kind = kind;
    t.weight_decay = kind != TensorKind::kNorm;
    cursor_ = t.offset + t.numel;
    (t.weight_decay ? unit_.decay_ranges : unit_.no_decay_ranges).push_back(t.range());
    unit_.tensors.push_back(std::move(t));
  }
  UnitLayout Finish(int64_t pad_multiple) {
    unit_.numel = cursor_;
    unit_.padded_numel = RoundUp(std::max<int64_t>(cursor_, 1), pad_multiple);
    return std::move(unit_);
  }

 private:
  int64_t align_;
  int64_t cursor_ = 0;
  UnitLayout unit_;
};

}  // namespace

Range Intersect(const Range& a, const Range& b) {
  const int64_t lo = std::max(a.begin, b.begin);
  const int64_t hi = std::min(a.end, b.end);
  return hi > lo ? Range{lo, hi} : Range{lo, lo};
}

const TensorSlot* UnitLayout::Find(const std::string& n) const {
  for (const TensorSlot& t : tensors) {
    if (t.name == n) return &t;
  }
  return nullptr;
}

StatusOr<ParamLayout> ParamLayout::Build(const ModelConfig& c, const LayoutOptions& options) {
  HT_RETURN_IF_ERROR(c.Validate());
  if (options.tensor_alignment < 1 || options.pad_multiple < 1) {
    return InvalidArgument(fmt::format("layout: tensor_alignment ({}) and pad_multiple ({}) must be >= 1",
                                       options.tensor_alignment, options.pad_multiple));
  }
  ParamLayout l;
  l.config_ = c;
  l.options_ = options;
  const int64_t C = c.hidden_size, V = c.vocab_size, F = c.intermediate_size;
  {
    UnitBuilder b(kEmbeddingUnit, "embedding", options.tensor_alignment);
    b.Add("model.embed_tokens.weight", {V, C}, TensorKind::kEmbedding);
    b.Add("model.norm.weight", {C}, TensorKind::kNorm);
    if (!c.tie_word_embeddings) b.Add("lm_head.weight", {V, C}, TensorKind::kLinear);
    l.units_.push_back(b.Finish(options.pad_multiple));
  }
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    UnitBuilder b(BlockUnit(static_cast<int>(layer)), fmt::format("layers.{}", layer),
                  options.tensor_alignment);
    const std::string p = fmt::format("model.layers.{}.", layer);
    b.Add(p + "input_layernorm.weight", {C}, TensorKind::kNorm);
    b.Add(p + "self_attn.q_proj.weight", {c.q_dim(), C}, TensorKind::kLinear);
    b.Add(p + "self_attn.k_proj.weight", {c.kv_dim(), C}, TensorKind::kLinear);
    b.Add(p + "self_attn.v_proj.weight", {c.kv_dim(), C}, TensorKind::kLinear);
    b.Add(p + "self_attn.o_proj.weight", {C, c.q_dim()}, TensorKind::kLinear);
    b.Add(p + "post_attention_layernorm.weight", {C}, TensorKind::kNorm);
    b.Add(p + "mlp.gate_proj.weight", {F, C}, TensorKind::kLinear);
    b.Add(p + "mlp.up_proj.weight", {F, C}, TensorKind::kLinear);
    b.Add(p + "mlp.down_proj.weight", {C, F}, TensorKind::kLinear);
    l.units_.push_back(b.Finish(options.pad_multiple));
  }
  return l;
}

StatusOr<ParamLayout> ParamLayout::BuildLora(const ModelConfig& c, int64_t rank,
                                             const std::vector<int>& targets,
                                             const LayoutOptions& options) {
  HT_ASSIGN_OR_RETURN(ParamLayout base, Build(c, options));
  if (rank < 1) return InvalidArgument(fmt::format("LoRA rank must be >= 1, got {}", rank));
  for (size_t i = 0; i < targets.size(); ++i) {
    const int t = targets[i];
    if (t < kQProj || t >= kNumBlockTensors || t == kPostNorm || (i > 0 && t <= targets[i - 1])) {
      return InvalidArgument("LoRA targets must be distinct projections in block order");
    }
  }
  ParamLayout l;
  l.config_ = c;
  l.options_ = options;
  l.units_.push_back(UnitBuilder(kEmbeddingUnit, "embedding", options.tensor_alignment)
                         .Finish(options.pad_multiple));
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const int u = BlockUnit(static_cast<int>(layer));
    UnitBuilder b(u, fmt::format("layers.{}", layer), options.tensor_alignment);
    for (int t : targets) {
      const TensorSlot& w = base.unit(u).tensors[t];
      // "model.layers.3.self_attn.q_proj.weight" -> PEFT's module prefix.
      const std::string module = "base_model.model." + w.name.substr(0, w.name.size() - 7);
      b.Add(module + ".lora_A.weight", {rank, w.shape[1]}, TensorKind::kLoraA);
      b.Add(module + ".lora_B.weight", {w.shape[0], rank}, TensorKind::kLoraB);
    }
    l.units_.push_back(b.Finish(options.pad_multiple));
  }
  return l;
}

int64_t ParamLayout::total_padded_numel() const {
  int64_t n = 0;
  for (const UnitLayout& u : units_) n += u.padded_numel;
  return n;
}

int64_t ParamLayout::total_param_numel() const {
  int64_t n = 0;
  for (const UnitLayout& u : units_) {
    for (const TensorSlot& t : u.tensors) n += t.numel;
  }
  return n;
}

std::vector<std::pair<int, const TensorSlot*>> ParamLayout::AllTensors() const {
  std::vector<std::pair<int, const TensorSlot*>> out;
  for (const UnitLayout& u : units_) {
    for (const TensorSlot& t : u.tensors) out.emplace_back(u.index, &t);
  }
  return out;
}

}  // namespace hypertrain::model
