#pragma once
// FP8 training: options, the per-tensor scaling slots and their state.
//
// With model.fp8 the block projections (q|k|v, o, gate|up, down; and the LM
// head with model.fp8_lm_head) multiply FP8 operands on the tensor cores:
//
//   forward  Y  = X W^T          X, W in e4m3
//   dgrad    dX = dY W           dY in e5m2 (model.fp8_grad_format), W e4m3
//   wgrad    dW = dY^T X         (accumulated in fp32, as in bf16)
//
// with one fp32 scale per tensor ("slot") and fp32 accumulation; outputs,
// attention, norms, master weights and the optimizer stay as in bf16.
// Each GEMM has three slots: its input X, its weight W, its output gradient
// dY (kInput, kWeight, kGradOutput).
//
// Scales (fp8_scale.h: powers of two, amax * scale <= the format's max):
//  - weights: from the tensor's own amax, computed when it is cast (the
//    exact value is at hand, so no history is needed);
//  - inputs and output gradients, recipe kDelayed (Transformer Engine's
//    DelayedScaling; the HyperPod recipes' fp8_amax_history_len /
//    fp8_amax_compute_algo): every pass records each tensor's amax; the
//    scale used in the next pass comes from the last `history_len` amaxes,
//    their max (kMax) or the newest (kMostRecent). No extra pass over the
//    tensor, but a tensor whose range jumps saturates until the history
//    catches up (one pass for most_recent, never shrinking for 1024 passes
//    with max). The first pass of a run (empty history) is scaled like
//    kTensorwise.
//  - recipe kTensorwise ("current scaling"): the scale comes from the
//    tensor's own amax, an extra read of the tensor before each cast; never
//    saturates; every rank's scale is its own.
// Fp8ScalingState keeps the amax histories and the delayed scales on the
// host; backends record one pass's amaxes with Record() and upload scales()
// before the next pass. Data-parallel ranks agree: the hooks' ReduceAmax
// (max over ranks) runs before Record, so every rank holds the same state and
// a checkpoint stores it once.
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/model/config.h"
#include "runtime/numerics/fp8_scale.h"

namespace hypertrain::model {

enum class Fp8Recipe { kDelayed, kTensorwise };
enum class AmaxComputeAlgo { kMax, kMostRecent };

struct Fp8Options {
  bool enabled = false;
  Fp8Recipe recipe = Fp8Recipe::kDelayed;
  int64_t amax_history_len = 1024;
  AmaxComputeAlgo amax_compute_algo = AmaxComputeAlgo::kMax;
  int64_t margin = 0;  // scale = 2^(e - margin): margin bits of headroom
  Fp8Format grad_format = Fp8Format::kE5M2;  // output gradients (backward)
  bool lm_head = false;  // the LM head's GEMMs in FP8 too

  Status Validate() const;
};

const char* Fp8FormatName(Fp8Format f);           // "e4m3", "e5m2"
const char* Fp8RecipeName(Fp8Recipe r);           // "delayed", "tensorwise"
const char* AmaxComputeAlgoName(AmaxComputeAlgo a);  // "max", "most_recent"
StatusOr<Fp8Format> ParseFp8Format(const std::string& s);
StatusOr<Fp8Recipe> ParseFp8Recipe(const std::string& s);
StatusOr<AmaxComputeAlgo> ParseAmaxComputeAlgo(const std::string& s);

// The FP8 GEMMs of one block, and the roles of a GEMM's operands.
enum class Fp8Gemm : int { kQkv = 0, kO, kGateUp, kDown };
inline constexpr int kFp8GemmsPerBlock = 4;
enum class Fp8Role : int { kInput = 0, kWeight, kGradOutput };
inline constexpr int kFp8Roles = 3;

// Slot numbering: block l's GEMM g, role r at (l * 4 + g) * 3 + r; the LM
// head's (when options.lm_head) after the last block's.
class Fp8Slots {
 public:
  Fp8Slots() = default;
  Fp8Slots(int num_layers, const Fp8Options& options);
  int size() const { return static_cast<int>(format_.size()); }
  int Block(int layer, Fp8Gemm g, Fp8Role r) const {
    return (layer * kFp8GemmsPerBlock + static_cast<int>(g)) * kFp8Roles + static_cast<int>(r);
  }
  // -1 when the LM head is not in FP8.
  int LmHead(Fp8Role r) const { return lm_head_ ? num_layers_ * 12 + static_cast<int>(r) : -1; }
  Fp8Format format(int slot) const { return format_[slot]; }
  Fp8Role role(int slot) const { return static_cast<Fp8Role>(slot % kFp8Roles); }
  // "layers.3.gate_up.grad_output", "lm_head.input".
  std::string Name(int slot) const;

 private:
  int num_layers_ = 0;
  bool lm_head_ = false;
  std::vector<Fp8Format> format_;
};

class Fp8ScalingState {
 public:
  Fp8ScalingState() = default;
  Fp8ScalingState(const Fp8Options& options, Fp8Slots slots);

  const Fp8Options& options() const { return options_; }
  const Fp8Slots& slots() const { return slots_; }
  int num_slots() const { return slots_.size(); }
  // Scales for the next pass (1 for slots without history). Weights' entries
  // are not used by the casts (their scale comes from their own amax).
  const std::vector<float>& scales() const { return scale_; }
  const std::vector<float>& scale_invs() const { return scale_inv_; }
  // Whether the next pass takes inputs' and gradients' scales from
  // scales() (delayed, history present) or from their own amax.
  bool UsesHistory() const {
    return options_.recipe == Fp8Recipe::kDelayed && filled_ > 0;
  }
  // Records one pass's amax per slot (num_slots values; inf / NaN count as
  // 0 and in nonfinite_amaxes()) and recomputes scales().
  Status Record(const std::vector<float>& amax);
  int64_t passes() const { return passes_; }
  int64_t nonfinite_amaxes() const { return nonfinite_; }
  // The amaxes of `slot` in the history, oldest first (at most history_len).
  std::vector<float> History(int slot) const;
  // Max over slots of a role of amax * scale / fp8_max for the newest pass
  // (<= 1 unless it saturated): how much of the range the last pass used.
  float NewestRangeUse(Fp8Role role) const;

  // Checkpoint form: {"version", "slots", "history_len", "passes",
  // "nonfinite", "formats", "history" (base64 of the filled rows, oldest
  // first, little-endian fp32 [rows][slots]), "scales" (base64)}.
  std::string ToJson() const;
  // Restores from ToJson() of a state with the same slots (DataLoss naming
  // what differs). A different history_len keeps the newest rows that fit.
  Status FromJson(const std::string& json);

 private:
  void Recompute();

  Fp8Options options_;
  Fp8Slots slots_;
  std::vector<float> history_;  // [history_len][num_slots] ring
  int64_t next_ = 0;            // ring row the next Record writes
  int64_t filled_ = 0;          // rows holding data
  int64_t passes_ = 0;
  int64_t nonfinite_ = 0;
  std::vector<float> scale_, scale_inv_;
};

}  // namespace hypertrain::model
