#pragma once
// The trainer's step metrics in Prometheus form, for `hypertrain launch
// --metrics-port` (the chart's PodMonitor scrapes it): the launcher tails
// <exp_dir>/metrics.jsonl, which the logging rank appends every
// log_every_n_steps, and exposes the latest record as gauges and the running
// totals as counters. A node whose exp_dir does not hold that file (node-local
// storage away from the logging rank) serves only the launcher's own series;
// on shared storage (FSx) every node serves the job's figures.
//
//   hypertrain_trainer_step, _max_steps, _loss, _learning_rate, _grad_norm,
//   _tokens_per_second (global), _tokens_per_second_per_device,
//   _step_time_seconds (mean over the interval), _mfu_ratio,
//   _data_wait_seconds (mean per step), _memory_bytes (device high-water mark),
//   _last_record_timestamp_seconds, _time_to_first_step_seconds
//   (the start-up record, runtime/train/metrics.h)                   (gauges)
//   hypertrain_trainer_tokens_total, _skipped_steps_total,
//   _checkpoint_stall_seconds_total                                  (counters)
//   hypertrain_launcher_ranks_running (gauge),
//   hypertrain_launcher_rank_exits_total{code} (counter)
#include <string>

#include "core/metrics.h"
#include "runtime/progress/progress_reporter.h"

namespace hypertrain::progress {

class TrainerMetrics {
 public:
  // Registers the series in `registry` (which must outlive this). `from_end`:
  // skip the records an earlier attempt left in the file.
  TrainerMetrics(metrics::Registry* registry, const std::string& jsonl_path, bool from_end);

  // Applies the records appended since the last call; true if any.
  bool Poll();
  void SetRanksRunning(int n) { ranks_running_.Set(n); }
  // A rank's exit status (128+signal for a signal).
  void RankExited(int code) { rank_exits_.With({std::to_string(code)}).Inc(); }

 private:
  void Apply(const nlohmann::json& record);

  JsonlTail tail_;
  metrics::Family<metrics::Gauge>& step_;
  metrics::Family<metrics::Gauge>& max_steps_;
  metrics::Family<metrics::Gauge>& loss_;
  metrics::Family<metrics::Gauge>& lr_;
  metrics::Family<metrics::Gauge>& grad_norm_;
  metrics::Family<metrics::Gauge>& tokens_per_s_;
  metrics::Family<metrics::Gauge>& tokens_per_s_per_device_;
  metrics::Family<metrics::Gauge>& step_time_;
  metrics::Family<metrics::Gauge>& mfu_;
  metrics::Family<metrics::Gauge>& data_wait_;
  metrics::Family<metrics::Gauge>& memory_;
  metrics::Family<metrics::Gauge>& last_record_;
  metrics::Family<metrics::Gauge>& time_to_first_step_;
  metrics::Family<metrics::Counter>& tokens_;
  metrics::Family<metrics::Counter>& skipped_;
  metrics::Family<metrics::Counter>& ckpt_stall_;
  metrics::Gauge& ranks_running_;
  metrics::Family<metrics::Counter>& rank_exits_;
};

}  // namespace hypertrain::progress
