#pragma once
// TracingHooks: a model::UnitHooks that records a step's forward and backward
// structure on the host track while it forwards every call to the real hooks
// (HSDP's, or the no-op ones). Spans, properly nested:
//
//   forward                   BeforeForward(embedding) .. AfterForward(embedding)
//     fwd layers.N            BeforeForward(block) .. AfterForward(block)
//       before_forward        the inner hook (HSDP: all-gather and its wait)
//       after_forward         (HSDP: release the gathered unit)
//   backward                  BeforeBackward(embedding) .. AfterBackward(embedding)
//     after_head_backward     (HSDP: the LM head's reduce-scatter)
//     bwd layers.N
//       before_backward, after_backward   (HSDP: gather, reduce-scatter)
//   finish_gradients, global_sum_squares, after_optimizer_step,
//   mean_across_data_parallel, reduce_amax   (called by the training loop)
//
// On a CPU backend the block spans are the compute; on a GPU backend they are
// the host's enqueue time (the device's own timeline comes from CUDA events).
// Outside the recorder's window every call only forwards.
#include <string>
#include <vector>

#include "runtime/model/unit_hooks.h"
#include "runtime/trace/recorder.h"

namespace hypertrain::trace {

class TracingHooks final : public model::UnitHooks {
 public:
  // `unit_names[u]` names unit u ("embedding", "layers.0", ...).
  TracingHooks(model::UnitHooks& inner, Recorder& recorder, std::vector<std::string> unit_names);

  Status BeginMicroBatch(int micro_batch, bool last) override;
  Status BeforeForward(int unit) override;
  Status AfterForward(int unit) override;
  Status BeforeBackward(int unit) override;
  Status AfterBackward(int unit) override;
  Status AfterHeadBackward() override;
  bool SplitsEmbeddingGrad() const override { return inner_.SplitsEmbeddingGrad(); }
  Status FinishGradients() override;
  StatusOr<double> GlobalSumSquares(double local) override;
  Status AfterOptimizerStep(int unit) override;
  bool OverwritesShardGrads() const override { return inner_.OverwritesShardGrads(); }
  StatusOr<double> MeanAcrossDataParallel(double local) override;
  Status ReduceAmax(float* amax, size_t n) override;

 private:
  // Runs `call` inside a span named `name` (args: the unit, when >= 0).
  template <typename F>
  auto Timed(const char* name, int unit, F&& call);
  const std::string& Name(int unit) const;

  model::UnitHooks& inner_;
  Recorder& r_;
  std::vector<std::string> names_;
  std::vector<std::string> fwd_names_, bwd_names_;
  std::vector<double> begin_;  // per unit: when its Before* hook was called
  double pass_begin_ = 0;
};

}  // namespace hypertrain::trace
