#include "runtime/train/step_tracer.h"

#include <spdlog/spdlog.h>

namespace hypertrain::train {

void StepTracer::BeginStep(int64_t step) {
  if (r_ == nullptr) return;
  step_ = step;
  if (!r_->active() && traced_ < profile_.num_steps && step > profile_.start_step) {
    r_->Start();
    if (traced_ == 0) first_ = step;
  }
  if (r_->active()) step_begin_ = r_->NowUs();
}

Status StepTracer::EndStep(double loss, int64_t tokens_seen) {
  if (r_ == nullptr || !r_->active()) return Status::Ok();
  if (parallel_ != nullptr) parallel_->FlushTrace();
  const double now = r_->NowUs();
  r_->Complete(trace::Recorder::kHostTrack, "step", "host", step_begin_, now,
               {{"step", step_}, {"loss", loss}, {"tokens_seen", tokens_seen}});
  constexpr double kMiB = 1024.0 * 1024.0;
  nlohmann::json mem = {{"rss", static_cast<double>(trace::ProcessRssBytes()) / kMiB}};
  if (backend_ != nullptr && backend_->PeakMemoryBytes() > 0) {
    mem["peak"] = static_cast<double>(backend_->PeakMemoryBytes()) / kMiB;
  }
  r_->Counter("memory (MiB)", now, std::move(mem));
  unwritten_ = true;
  if (++traced_ < profile_.num_steps) return Status::Ok();
  r_->Stop();
  return Write();
}

Status StepTracer::Finish() {
  if (r_ == nullptr) return Status::Ok();
  r_->Stop();
  return unwritten_ ? Write() : Status::Ok();
}

Status StepTracer::Write() {
  unwritten_ = false;
  StatusOr<std::string> path = r_->Write();
  if (!path.ok()) return path.status();
  spdlog::info("trace: {} ({} events, steps {}..{}{}); merge the ranks with `hypertrain trace merge {}`", *path,
               r_->event_count(), first_, step_,
               r_->dropped() > 0 ? ", " + std::to_string(r_->dropped()) + " dropped" : "",
               r_->options().dir);
  return Status::Ok();
}

}  // namespace hypertrain::train
