#include "runtime/trace/tracing_hooks.h"

namespace hypertrain::trace {
namespace {
constexpr int kEmbedding = 0;  // model::ParamLayout::kEmbeddingUnit
}  // namespace

TracingHooks::TracingHooks(model::UnitHooks& inner, Recorder& recorder, std::vector<std::string> unit_names)
    : inner_(inner), r_(recorder), names_(std::move(unit_names)), begin_(names_.size(), 0.0) {
  for (const std::string& n : names_) {
    fwd_names_.push_back("fwd " + n);
    bwd_names_.push_back("bwd " + n);
  }
}

const std::string& TracingHooks::Name(int unit) const {
  static const std::string kUnknown = "?";
  return unit >= 0 && unit < static_cast<int>(names_.size()) ? names_[unit] : kUnknown;
}

template <typename F>
auto TracingHooks::Timed(const char* name, int unit, F&& call) {
  if (!r_.active()) return call();
  const double b = r_.NowUs();
  auto result = call();
  r_.Complete(Recorder::kHostTrack, name, "host", b, r_.NowUs(),
              unit >= 0 ? nlohmann::json{{"unit", Name(unit)}} : nlohmann::json(nullptr));
  return result;
}

Status TracingHooks::BeginMicroBatch(int micro_batch, bool last) {
  if (r_.active()) {
    r_.Instant(Recorder::kHostTrack, "micro_batch", "host", r_.NowUs(),
               {{"micro_batch", micro_batch}, {"last", last}});
  }
  return inner_.BeginMicroBatch(micro_batch, last);
}

Status TracingHooks::BeforeForward(int unit) {
  if (unit >= 0 && unit < static_cast<int>(begin_.size())) begin_[unit] = r_.NowUs();
  if (unit == kEmbedding) pass_begin_ = begin_[unit];
  return Timed("before_forward", unit, [&] { return inner_.BeforeForward(unit); });
}

Status TracingHooks::AfterForward(int unit) {
  Status s = Timed("after_forward", unit, [&] { return inner_.AfterForward(unit); });
  if (r_.active() && unit >= 0 && unit < static_cast<int>(begin_.size())) {
    const double end = r_.NowUs();
    if (unit == kEmbedding) {
      r_.Complete(Recorder::kHostTrack, "forward", "host", pass_begin_, end);
    } else {
      r_.Complete(Recorder::kHostTrack, fwd_names_[unit], "host", begin_[unit], end);
    }
  }
  return s;
}

Status TracingHooks::BeforeBackward(int unit) {
  if (unit >= 0 && unit < static_cast<int>(begin_.size())) begin_[unit] = r_.NowUs();
  return Timed("before_backward", unit, [&] { return inner_.BeforeBackward(unit); });
}

Status TracingHooks::AfterBackward(int unit) {
  Status s = Timed("after_backward", unit, [&] { return inner_.AfterBackward(unit); });
  if (r_.active() && unit >= 0 && unit < static_cast<int>(begin_.size())) {
    const double end = r_.NowUs();
    r_.Complete(Recorder::kHostTrack, unit == kEmbedding ? std::string("backward") : bwd_names_[unit], "host",
                begin_[unit], end);
  }
  return s;
}

Status TracingHooks::AfterHeadBackward() {
  return Timed("after_head_backward", -1, [&] { return inner_.AfterHeadBackward(); });
}

Status TracingHooks::FinishGradients() {
  return Timed("finish_gradients", -1, [&] { return inner_.FinishGradients(); });
}

StatusOr<double> TracingHooks::GlobalSumSquares(double local) {
  return Timed("global_sum_squares", -1, [&] { return inner_.GlobalSumSquares(local); });
}

Status TracingHooks::AfterOptimizerStep(int unit) {
  return Timed("after_optimizer_step", unit, [&] { return inner_.AfterOptimizerStep(unit); });
}

StatusOr<double> TracingHooks::MeanAcrossDataParallel(double local) {
  return Timed("mean_across_data_parallel", -1, [&] { return inner_.MeanAcrossDataParallel(local); });
}

Status TracingHooks::ReduceAmax(float* amax, size_t n) {
  return Timed("reduce_amax", -1, [&] { return inner_.ReduceAmax(amax, n); });
}

}  // namespace hypertrain::trace
