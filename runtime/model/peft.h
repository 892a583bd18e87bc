#pragma once
// Parameter-efficient fine-tuning: LoRA and QLoRA on the block projections.
//
// With LoRA every target projection W [out, in] of every block stays frozen
// and gains an adapter pair A [rank, in], B [out, rank]:
//   y = x W^T + s * (dropout(x) A^T) B^T,   s = alpha / rank
// (PEFT's LoraLayer with fan_in_fan_out false, no bias, no rsLoRA/DoRA). Only
// A and B train: a backend in PEFT mode exposes the ADAPTERS as its
// ParamLayout (ParamLayout::BuildLora: one unit per model unit, PEFT's tensor
// names), so the optimizer, gradient norm, HSDP reductions and checkpoints
// see only them. The base model (embedding, norms, LM head and every
// projection) is a frozen store in the compute dtype - bf16 on a GPU, no fp32
// master, gradient or optimizer state - or, for QLoRA, with the block
// projections in NF4 (runtime/model/nf4.h) and the rest in the compute dtype.
//
// Dropout acts on the adapter input only. Its mask is counter-based (no
// sequential RNG): element i of the input of target t in layer l during pass
// p keeps iff DropoutKeep(DropoutKey(seed, p, l, t), i, threshold), so a
// recomputation (activation checkpointing) and every backend draw the same
// mask, and a resumed run draws the masks the uninterrupted one would have
// (the trainer numbers passes step * A + micro_batch: TokenBatch::rng_offset).
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/numerics/counter_rng.h"
#include "runtime/model/init.h"
#include "runtime/model/layout.h"

namespace hypertrain::model {

enum class PeftType { kNone, kLora, kQlora };

const char* PeftTypeName(PeftType t);  // "none", "lora", "qlora"
// "lora" / "LORA", "qlora" / "QLORA", "none" / "" / "null".
StatusOr<PeftType> ParsePeftType(const std::string& s);

// Block projections by PEFT module name: q_proj, k_proj, v_proj, o_proj,
// gate_proj, up_proj, down_proj (the short forms q, k, v, o, gate, up, down
// too). Returns the BlockTensor index.
StatusOr<int> ParseTargetModule(const std::string& s);
const char* TargetModuleName(int block_tensor);  // "q_proj", ...

struct PeftOptions {
  PeftType type = PeftType::kNone;
  int64_t rank = 8;      // PEFT's LoraConfig defaults
  double alpha = 8;
  double dropout = 0.0;  // on the adapter input, in [0, 1)
  // BlockTensor indices, ascending (default: all seven projections).
  std::vector<int> targets = {kQProj, kKProj, kVProj, kOProj, kGateProj, kUpProj, kDownProj};
  // model.peft.fp8_base (CUDA, bf16): the frozen block projections' forward
  // and input-gradient GEMMs run in FP8 (e4m3, one power-of-two scale per
  // weight from its own amax); the adapters, norms, attention, embedding and
  // LM head stay bf16. LoRA: the projections are held as those codes, cast
  // once at load (half the base's memory; read back as the forward sees
  // them). QLoRA: they stay NF4 and each block is dequantised to the codes.
  bool fp8_base = false;

  bool enabled() const { return type != PeftType::kNone; }
  bool quantized() const { return type == PeftType::kQlora; }
  double scaling() const { return alpha / static_cast<double>(rank); }
  // InvalidArgument naming the model.peft key.
  Status Validate() const;
  std::string Summary() const;  // "lora rank 16, alpha 32 (scaling 2), dropout 0.05, q,k,v,o,gate,up,down"
};

// Where target t's adapters sit inside a block unit of the adapter layout:
// lora_a[t] / lora_b[t] index UnitLayout::tensors, -1 when t is no target.
struct AdapterSlots {
  int lora_a[kNumBlockTensors];
  int lora_b[kNumBlockTensors];
  static AdapterSlots For(const std::vector<int>& targets);
  bool has(int t) const { return lora_a[t] >= 0; }
};

// The adapter layout of `options` (ParamLayout::BuildLora).
StatusOr<ParamLayout> BuildAdapterLayout(const ModelConfig& config, const PeftOptions& options,
                                         const LayoutOptions& layout = {});

// Model FLOPs per token of a PEFT step, the MFU numerator: the frozen base
// runs forward (2N) and the input-gradient half of its backward (2N), no
// weight gradients: 4 * matmul params; the adapters train fully: 6 * their
// parameters; attention as for full training, 12 * l * h * seq.
StatusOr<double> PeftTrainFlopsPerToken(const ModelConfig& config, const PeftOptions& options, int64_t seq);

// ---- Dropout (host and device) ---------------------------------------------
// DropoutKey / DropoutKeep: runtime/numerics/counter_rng.h.
uint32_t DropoutThreshold(double p);

// What a LoRA op needs to draw one adapter input's mask.
struct DropoutMask {
  uint64_t key = 0;
  uint32_t threshold = 0;  // 0 = no dropout
  float scale = 1.0f;      // 1 / (1 - p)
  bool active() const { return threshold != 0; }
};
DropoutMask MakeDropoutMask(const PeftOptions& o, uint64_t seed, uint64_t pass, int layer,
                            int target);

}  // namespace hypertrain::model
