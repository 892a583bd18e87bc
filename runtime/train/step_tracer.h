#pragma once
// StepTracer: the training loop's side of trainer.profile (runtime/trace).
// It opens the recorder's window at the first step due (numbers after
// profile.start_step; a run resumed past it traces its first num_steps),
// records each traced step as a "step" span on the host track with its number
// and loss and a memory counter, has the parallel runtime flush its
// device-timed collectives, and writes this rank's file when the window
// closes (or at Finish, e.g. after an error mid-window). Without a recorder
// every call is a branch.
#include <cstdint>

#include "core/status.h"
#include "runtime/config/config.h"
#include "runtime/model/backend.h"
#include "runtime/train/parts.h"
#include "runtime/trace/recorder.h"

namespace hypertrain::train {

class StepTracer {
 public:
  StepTracer() = default;  // off
  StepTracer(trace::Recorder* recorder, const config::ProfileConfig& profile, ParallelRuntime* parallel,
             model::Backend* backend)
      : r_(recorder), profile_(profile), parallel_(parallel), backend_(backend) {}

  // Before step `step` (1-based) runs.
  void BeginStep(int64_t step);
  // The recorder while the window is open, else nullptr (for trace::Span).
  trace::Recorder* recording() const { return r_ != nullptr && r_->active() ? r_ : nullptr; }
  // After the step (the device is synchronised): its span, counters, flushes;
  // writes the file when this was the window's last step.
  Status EndStep(double loss, int64_t tokens_seen);
  // Writes what was recorded and not written yet (end of run, or an error).
  Status Finish();

 private:
  Status Write();

  trace::Recorder* r_ = nullptr;
  config::ProfileConfig profile_;
  ParallelRuntime* parallel_ = nullptr;
  model::Backend* backend_ = nullptr;
  int64_t traced_ = 0, step_ = 0, first_ = 0;
  double step_begin_ = 0;
  bool unwritten_ = false;
};

}  // namespace hypertrain::train
