#pragma once
// Per-step metrics: a human log line (spdlog), a JSONL record and TensorBoard
// scalars. Written by the logging rank only.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "core/startup_phases.h"
#include "core/status.h"
#include <nlohmann/json.hpp>

#include "runtime/train/tensorboard.h"

namespace hypertrain::train {

struct StepMetrics {
  int64_t step = 0;  // 1-based optimizer step just finished
  int64_t max_steps = 0;
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  double loss_scale = 1;
  bool skipped = false;       // non-finite gradients: update not applied
  double step_time_s = 0;     // mean over the logging interval
  double tokens_per_s = 0;    // global (all ranks)
  double tokens_per_s_per_device = 0;
  double mfu = 0;             // fraction of peak, 0 when the peak is unknown
  double data_wait_s = 0;     // mean per step over the interval
  double checkpoint_stall_s = 0;  // the step loop's wait on checkpoint saves since the previous record
  int64_t memory_bytes = 0;   // device (CPU: process) high-water mark
  double eta_s = 0;
  int64_t tokens_seen = 0;
};

// "step 10/60 | loss 3.2101 | lr 2.95e-03 | ..." (the log line).
std::string FormatStepLine(const StepMetrics& m);

struct ValMetrics {
  int64_t step = 0;
  double loss = 0;      // mean over every token of every batch, all data-parallel ranks
  int64_t batches = 0;  // per rank
  int64_t tokens = 0;   // all ranks
  double seconds = 0;   // wall time of the evaluation
};

// The first step after a resume from a checkpoint (contract::Recovery, the
// progress annotation's recovery section): written atomically as
// <exp_dir>/recovery.json (contract::EncodeRecovery), which node 0's launcher
// forwards; not a metrics.jsonl line, whose every record is a step's.
struct RecoveryMetrics {
  int64_t step = 0;               // the first step after the resume
  int64_t resumed_from_step = 0;
  double rendezvous_s = 0;        // rendezvous and process groups
  double checkpoint_load_s = 0;
  double checkpoint_load_gbps = 0;  // this rank's shard bytes / checkpoint_load_s; 0 = unknown
  double first_step_s = 0;
  double trainer_s = 0;           // the trainer's start to the end of the first step
};

class MetricsWriter {
 public:
  // Opens <exp_dir>/metrics.jsonl (append) and, with `tensorboard`,
  // <exp_dir>/tensorboard/.
  static StatusOr<std::unique_ptr<MetricsWriter>> Create(const std::string& exp_dir, bool tensorboard = true);
  ~MetricsWriter();
  Status Write(const StepMetrics& m);
  // A held-out evaluation: {"step", "val/loss", "val/perplexity", ...} in
  // metrics.jsonl and val/loss, val/perplexity in TensorBoard.
  Status WriteValidation(const ValMetrics& v);
  // After the first step of this process: the next step record carries
  // "startup": {"time_to_first_step_s", "other_s", "phases": [{"name",
  // "seconds", "depth"}...]} (one more key in a line every reader already
  // parses, no extra line) and TensorBoard gets perf/time_to_first_step_s.
  void AttachStartup(const startup::Summary& s);
  Status WriteRecovery(const RecoveryMetrics& r);  // <exp_dir>/recovery.json
  Status Flush();  // before a stop on request
  const std::string& jsonl_path() const { return jsonl_path_; }
  std::string tensorboard_path() const { return tb_ ? tb_->path() : std::string("(off)"); }

 private:
  MetricsWriter() = default;
  Status WriteLine(const nlohmann::json& j);
  std::string jsonl_path_;
  std::string recovery_path_;
  std::FILE* jsonl_ = nullptr;
  std::unique_ptr<TfEventsWriter> tb_;
  std::optional<nlohmann::json> startup_;  // for the next step record
  double time_to_first_step_s_ = 0;
};

}  // namespace hypertrain::train
