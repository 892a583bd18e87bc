#include "runtime/train/metrics.h"

#include "contract/progress.h"
#include "core/atomic_file.h"
#include "core/time.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace hypertrain::train {
namespace {

std::string Hms(double s) {
  if (!(s >= 0) || s > 1e8) return "--:--:--";
  const int64_t t = static_cast<int64_t>(s + 0.5);
  return fmt::format("{:02d}:{:02d}:{:02d}", t / 3600, (t / 60) % 60, t % 60);
}

std::string Rate(double x) {
  if (x >= 1e6) return fmt::format("{:.2f}M", x / 1e6);
  if (x >= 1e3) return fmt::format("{:.1f}k", x / 1e3);
  return fmt::format("{:.0f}", x);
}

}  // namespace

std::string FormatStepLine(const StepMetrics& m) {
  return fmt::format(
      "step {}/{} | loss {:.4f} | lr {:.3e} | grad norm {:.3f}{} | {} tok/s ({} per device) | "
      "MFU {} | mem {:.1f} MiB | data wait {:.1f} ms | step {:.1f} ms | ETA {}",
      m.step, m.max_steps, m.loss, m.lr, m.grad_norm, m.skipped ? " (skipped: non-finite)" : "",
      Rate(m.tokens_per_s), Rate(m.tokens_per_s_per_device),
      m.mfu > 0 ? fmt::format("{:.1f}%", 100 * m.mfu) : std::string("n/a"),
      m.memory_bytes / 1048576.0, 1e3 * m.data_wait_s, 1e3 * m.step_time_s, Hms(m.eta_s));
}

StatusOr<std::unique_ptr<MetricsWriter>> MetricsWriter::Create(const std::string& exp_dir, bool tensorboard) {
  std::error_code ec;
  std::filesystem::create_directories(exp_dir, ec);
  if (ec) {
    const std::string m = fmt::format("exp_manager.exp_dir {}: cannot create: {}", exp_dir, ec.message());
    return IsPathConfigErrno(ec.value()) ? InvalidArgument(m) : IoError(m);
  }
  std::unique_ptr<MetricsWriter> w(new MetricsWriter());
  w->jsonl_path_ = exp_dir + "/metrics.jsonl";
  w->recovery_path_ = exp_dir + "/recovery.json";
  w->jsonl_ = std::fopen(w->jsonl_path_.c_str(), "a");
  if (w->jsonl_ == nullptr) {
    const int err = errno;
    const std::string m = fmt::format("{}: cannot open: {}", w->jsonl_path_, std::strerror(err));
    return IsPathConfigErrno(err) ? InvalidArgument(m) : IoError(m);
  }
  if (tensorboard) {
    HT_ASSIGN_OR_RETURN(w->tb_, TfEventsWriter::Create(exp_dir + "/tensorboard"));
  }
  return w;
}

Status MetricsWriter::WriteLine(const nlohmann::json& j) {
  const std::string line = j.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), jsonl_) != line.size() || std::fflush(jsonl_) != 0) {
    return IoError(fmt::format("{}: write failed", jsonl_path_));
  }
  return Status::Ok();
}

Status MetricsWriter::WriteValidation(const ValMetrics& v) {
  const double wall =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double ppl = std::exp(v.loss);
  nlohmann::json j = {{"step", v.step},           {"val/loss", v.loss},
                      {"val/perplexity", ppl},     {"val/batches", v.batches},
                      {"val/tokens", v.tokens},    {"val/time_s", v.seconds},
                      {"wall_time", wall}};
  for (auto& [k, x] : j.items()) {
    if (x.is_number_float() && !std::isfinite(x.get<double>())) x = nullptr;
  }
  HT_RETURN_IF_ERROR(WriteLine(j));
  if (tb_ == nullptr) return Status::Ok();
  HT_RETURN_IF_ERROR(tb_->AddScalars(v.step, wall,
                                     {{"val/loss", v.loss}, {"val/perplexity", ppl}, {"perf/val_time_s", v.seconds}}));
  return tb_->Flush();
}

void MetricsWriter::AttachStartup(const startup::Summary& s) {
  nlohmann::json phases = nlohmann::json::array();
  for (const startup::PhaseRecord& p : s.phases) {
    phases.push_back({{"name", p.name}, {"seconds", p.seconds}, {"depth", p.depth}});
  }
  startup_ = nlohmann::json{{"time_to_first_step_s", s.time_to_first_step_s},
                            {"other_s", s.other_s},
                            {"phases", std::move(phases)}};
  time_to_first_step_s_ = s.time_to_first_step_s;
}

Status MetricsWriter::WriteRecovery(const RecoveryMetrics& r) {
  const auto now = std::chrono::system_clock::now();
  contract::Recovery c;
  c.resumed_from_step = r.resumed_from_step;
  c.first_step_time = FormatRfc3339(now, TimePrecision::kMillis);
  c.rendezvous_seconds = r.rendezvous_s;
  c.checkpoint_load_seconds = r.checkpoint_load_s;
  if (r.checkpoint_load_gbps > 0) c.checkpoint_load_gbps = r.checkpoint_load_gbps;
  c.first_step_seconds = r.first_step_s;
  c.trainer_seconds = r.trainer_s;
  return WriteFileAtomically(recovery_path_, contract::EncodeRecovery(c) + "\n");
}

Status MetricsWriter::Flush() {
  if (std::fflush(jsonl_) != 0) return IoError(fmt::format("{}: flush failed", jsonl_path_));
  if (tb_ == nullptr) return Status::Ok();
  return tb_->Flush();
}

MetricsWriter::~MetricsWriter() {
  if (jsonl_ != nullptr) std::fclose(jsonl_);
}

Status MetricsWriter::Write(const StepMetrics& m) {
  const double wall =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::json j = {
      {"step", m.step},           {"max_steps", m.max_steps}, {"loss", m.loss},
      {"lr", m.lr},               {"grad_norm", m.grad_norm},
      {"loss_scale", m.loss_scale}, {"skipped", m.skipped},
      {"step_time_s", m.step_time_s}, {"tokens_per_s", m.tokens_per_s},
      {"tokens_per_s_per_device", m.tokens_per_s_per_device}, {"mfu", m.mfu},
      {"data_wait_s", m.data_wait_s}, {"checkpoint_stall_s", m.checkpoint_stall_s},
      {"memory_bytes", m.memory_bytes},
      {"eta_s", m.eta_s},         {"tokens_seen", m.tokens_seen},
      {"wall_time", wall},
  };
  // NaN/inf are not JSON: write them as null.
  for (auto& [k, v] : j.items()) {
    if (v.is_number_float() && !std::isfinite(v.get<double>())) v = nullptr;
  }
  const bool with_startup = startup_.has_value();
  if (with_startup) j["startup"] = std::move(*startup_);
  startup_.reset();
  HT_RETURN_IF_ERROR(WriteLine(j));
  if (tb_ == nullptr) return Status::Ok();
  if (with_startup) {
    HT_RETURN_IF_ERROR(tb_->AddScalars(m.step, wall, {{"perf/time_to_first_step_s", time_to_first_step_s_}}));
  }
  HT_RETURN_IF_ERROR(tb_->AddScalars(m.step, wall,
                                     {{"train/loss", m.loss},
                                      {"train/lr", m.lr},
                                      {"train/grad_norm", m.grad_norm},
                                      {"train/loss_scale", m.loss_scale},
                                      {"perf/tokens_per_s", m.tokens_per_s},
                                      {"perf/tokens_per_s_per_device", m.tokens_per_s_per_device},
                                      {"perf/mfu", m.mfu},
                                      {"perf/step_time_s", m.step_time_s},
                                      {"perf/data_wait_s", m.data_wait_s},
                                      {"perf/checkpoint_stall_s", m.checkpoint_stall_s},
                                      {"perf/memory_gib", m.memory_bytes / 1073741824.0}}));
  return tb_->Flush();
}

}  // namespace hypertrain::train
