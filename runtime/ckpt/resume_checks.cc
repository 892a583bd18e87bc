#include "runtime/ckpt/resume_checks.h"

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/crc32c.h"
#include "runtime/data/manifest.h"
#include "runtime/model/fp8.h"
#include "runtime/model/peft.h"

namespace hypertrain::ckpt {
namespace {

using json = nlohmann::json;

std::string DescribeData(const json& d) {
  if (!d.is_object()) return "unrecorded data";
  if (d.value("synthetic", false)) return "synthetic data";
  std::string s = "model.data.train_dir " + d.value("train_dir", std::string("?"));
  if (d.contains("manifest_crc32c")) {
    s += fmt::format(" (manifest.json crc32c {}, {} tokens)", d["manifest_crc32c"].get<std::string>(),
                     d.value("tokens", int64_t{0}));
  } else {
    s += " (no manifest.json)";
  }
  return s;
}

bool SameData(const json& a, const json& b) {
  if (a.value("synthetic", false) || b.value("synthetic", false)) return a == b;
  // The manifest says what the data is wherever it lives; without one, the path.
  if (a.contains("manifest_crc32c") || b.contains("manifest_crc32c")) {
    return a.value("manifest_crc32c", std::string()) == b.value("manifest_crc32c", std::string());
  }
  return a.value("train_dir", std::string()) == b.value("train_dir", std::string());
}

}  // namespace

json TrajectoryKeys(const config::TrainConfig& c) {
  const model::ModelConfig& m = c.model;
  const config::OptimConfig& o = c.optim;
  json j = {
      {"model.vocab_size", m.vocab_size},
      {"model.hidden_size", m.hidden_size},
      {"model.num_hidden_layers", m.num_hidden_layers},
      {"model.num_attention_heads", m.num_attention_heads},
      {"model.num_key_value_heads", m.num_key_value_heads},
      {"model.intermediate_size", m.intermediate_size},
      {"model.max_context_width", m.max_context_width},
      {"model.rope_theta", m.rope_theta},
      {"model.rope_scaling", m.rope_scaling.type == model::RopeScalingType::kNone
                                 ? json(nullptr)
                                 : json({m.rope_scaling.factor, m.rope_scaling.low_freq_factor,
                                         m.rope_scaling.high_freq_factor,
                                         m.rope_scaling.original_max_position_embeddings})},
      {"model.rms_norm_eps", m.rms_norm_eps},
      {"model.tie_word_embeddings", m.tie_word_embeddings},
      {"model.optim.name", o.name},
      {"model.optim.lr", o.lr},
      {"model.optim.weight_decay", o.weight_decay},
      {"model.optim.betas", {o.beta1, o.beta2}},
      {"model.optim.eps", o.eps},
      {"model.optim.sched.name", static_cast<int>(o.sched)},
      {"model.optim.sched.warmup_steps", o.warmup_steps},
      {"model.optim.sched.constant_steps", o.constant_steps},
      {"model.optim.sched.min_lr", o.min_lr},
      {"model.train_batch_size", c.train_batch_size},
      // An elastic resize changes the split of the same global batch, not the job.
      {"model.grad_accumulation_steps",
       c.desired_grad_accumulation_steps > 0 ? c.desired_grad_accumulation_steps : c.grad_accumulation_steps},
      {"model.grad_clip", c.grad_clip},
      {"trainer.precision", model::PrecisionName(c.precision)},
      {"model.seed", c.seed},
  };
  // max_steps only through the schedule: where the decay ends (a longer run
  // with model.lr_decay_iters set follows the same trajectory).
  if (o.sched != config::ScheduleKind::kConstant) {
    j[o.decay_steps > 0 ? "model.lr_decay_iters" : "model.lr_decay_iters (0: trainer.max_steps)"] =
        o.DecayEnd(c.max_steps) + o.constant_steps;
  }
  if (c.fp8.enabled) {  // only then, so that bf16 runs compare equal
    j["model.fp8"] = {model::Fp8RecipeName(c.fp8.recipe), c.fp8.amax_history_len,
                      model::AmaxComputeAlgoName(c.fp8.amax_compute_algo), c.fp8.margin,
                      model::Fp8FormatName(c.fp8.grad_format), c.fp8.lm_head};
  }
  if (c.finetune.peft.enabled()) {
    j["model.peft"] = {model::PeftTypeName(c.finetune.peft.type), c.finetune.peft.rank, c.finetune.peft.alpha,
                       c.finetune.peft.dropout, c.finetune.peft.targets};
    if (c.finetune.peft.fp8_base) j["model.peft.fp8_base"] = true;  // only then: older checkpoints compare equal
  }
  return j;
}

json DataIdentity(const config::TrainConfig& c) {
  if (c.data.use_synthetic_data) return {{"synthetic", true}};
  json d = {{"train_dir", c.data.train_dir}};
  StatusOr<std::string> text = ReadFileToString(c.data.train_dir + "/" + data::kManifestFile);
  if (!text.ok()) return d;
  d["manifest_crc32c"] = Crc32cHex(Crc32c(text->data(), text->size()));
  StatusOr<data::DataManifest> m = data::DataManifest::Parse(*text, c.data.train_dir);
  if (m.ok()) d["tokens"] = m->tokens;
  return d;
}

std::vector<std::string> ResumeWarnings(const std::string& path, const json& saved, const std::string& saved_hash,
                                        const json& trajectory, const std::string& hash, const json& data) {
  std::vector<std::string> out;
  if (saved.contains("trajectory") && saved["trajectory"].is_object()) {
    const json& was = saved["trajectory"];
    std::string changed;
    for (auto it = trajectory.begin(); it != trajectory.end(); ++it) {
      const std::string old = was.contains(it.key()) ? was[it.key()].dump() : "unset";
      if (old != it.value().dump()) changed += fmt::format("{}{} {} -> {}", changed.empty() ? "" : ", ", it.key(), old, it.value().dump());
    }
    for (auto it = was.begin(); it != was.end(); ++it) {
      if (!trajectory.contains(it.key())) changed += fmt::format("{}{} {} -> unset", changed.empty() ? "" : ", ", it.key(), it.value().dump());
    }
    if (!changed.empty()) {
      out.push_back(fmt::format("resuming {} under a config that changes the training trajectory: {}", path, changed));
    }
  } else if (!saved_hash.empty() && saved_hash != hash) {
    out.push_back(fmt::format("resuming {} written with config hash {}, current config hash is {} (the checkpoint "
                              "predates the per-key record, so the changed keys cannot be named)",
                              path, saved_hash, hash));
  }
  if (saved.contains("data") && !SameData(saved["data"], data)) {
    out.push_back(fmt::format("resuming {} on other data: it was trained on {}, this run reads {}; the sampler "
                              "continues at the checkpoint's position in this data",
                              path, DescribeData(saved["data"]), DescribeData(data)));
  }
  return out;
}

}  // namespace hypertrain::ckpt
