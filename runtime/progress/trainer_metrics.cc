#include "runtime/progress/trainer_metrics.h"

namespace hypertrain::progress {
namespace {

// The record's number at `key`, if it is one (NaN/inf are written as null).
std::optional<double> Number(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace

TrainerMetrics::TrainerMetrics(metrics::Registry* r, const std::string& jsonl_path, bool from_end)
    : tail_(jsonl_path, from_end),
      step_(r->AddGauge("hypertrain_trainer_step", "Optimizer steps finished (latest metrics record).")),
      max_steps_(r->AddGauge("hypertrain_trainer_max_steps", "trainer.max_steps of the run.")),
      loss_(r->AddGauge("hypertrain_trainer_loss", "Training loss at the latest record.")),
      lr_(r->AddGauge("hypertrain_trainer_learning_rate", "Learning rate at the latest record.")),
      grad_norm_(r->AddGauge("hypertrain_trainer_grad_norm", "Global gradient norm at the latest record.")),
      tokens_per_s_(r->AddGauge("hypertrain_trainer_tokens_per_second",
                                "Training throughput of the whole job, mean over the last logging interval.")),
      tokens_per_s_per_device_(r->AddGauge("hypertrain_trainer_tokens_per_second_per_device",
                                           "Training throughput per device (GPU or CPU rank).")),
      step_time_(r->AddGauge("hypertrain_trainer_step_time_seconds",
                             "Mean optimizer step time over the last logging interval.")),
      mfu_(r->AddGauge("hypertrain_trainer_mfu_ratio",
                       "Model FLOPs utilisation (0..1; 0 when the device's peak is unknown).")),
      data_wait_(r->AddGauge("hypertrain_trainer_data_wait_seconds",
                             "Mean time per step the step loop waited for its batch.")),
      memory_(r->AddGauge("hypertrain_trainer_memory_bytes", "Device memory high-water mark of the logging rank.")),
      last_record_(r->AddGauge("hypertrain_trainer_last_record_timestamp_seconds",
                               "Wall-clock time of the latest metrics record (alert when it stops moving).")),
      time_to_first_step_(r->AddGauge("hypertrain_trainer_time_to_first_step_seconds",
                                      "Seconds from the trainer's exec to the end of its first step (this attempt).")),
      tokens_(r->AddCounter("hypertrain_trainer_tokens_total", "Tokens trained on since the run began.")),
      skipped_(r->AddCounter("hypertrain_trainer_skipped_steps_total",
                             "Logged steps whose update was skipped (non-finite gradients) since this launcher started.")),
      ckpt_stall_(r->AddCounter("hypertrain_trainer_checkpoint_stall_seconds_total",
                                "Time the step loop waited on checkpoint saves since this launcher started.")),
      ranks_running_(r->AddGauge("hypertrain_launcher_ranks_running", "Ranks this launcher is running.").With()),
      rank_exits_(r->AddCounter("hypertrain_launcher_rank_exits_total",
                                "Rank exits by exit code (128+N: killed by signal N).", {"code"})) {}

bool TrainerMetrics::Poll() {
  return tail_.PollRecords([this](const nlohmann::json& j) { Apply(j); });
}

void TrainerMetrics::Apply(const nlohmann::json& j) {
  step_.With().Set(j["step"].get<double>());
  const std::pair<metrics::Family<metrics::Gauge>*, const char*> gauges[] = {
      {&max_steps_, "max_steps"},    {&loss_, "loss"},
      {&lr_, "lr"},                  {&grad_norm_, "grad_norm"},
      {&tokens_per_s_, "tokens_per_s"}, {&tokens_per_s_per_device_, "tokens_per_s_per_device"},
      {&step_time_, "step_time_s"},  {&mfu_, "mfu"},
      {&data_wait_, "data_wait_s"},  {&memory_, "memory_bytes"},
      {&last_record_, "wall_time"}};
  for (const auto& [family, key] : gauges) {
    if (auto v = Number(j, key)) family->With().Set(*v);
  }
  if (auto s = j.find("startup"); s != j.end() && s->is_object()) {
    if (auto v = Number(*s, "time_to_first_step_s")) time_to_first_step_.With().Set(*v);
  }
  if (auto v = Number(j, "tokens_seen")) tokens_.With().SetFromSource(*v);
  if (auto v = Number(j, "checkpoint_stall_s")) ckpt_stall_.With().Inc(*v);
  auto skipped = j.find("skipped");
  if (skipped != j.end() && skipped->is_boolean() && skipped->get<bool>()) skipped_.With().Inc();
}

}  // namespace hypertrain::progress
