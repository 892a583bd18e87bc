// Range and cross-key checks of a parsed TrainConfig (runtime/config/reader.h).
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "contract/profile.h"
#include "runtime/config/config.h"
#include "runtime/config/reader.h"

namespace hypertrain::config::internal {
namespace {

template <typename T>
Status Check(bool ok, const std::string& key, T value, const std::string& rule) {
  if (ok) return Status::Ok();
  return InvalidArgument(fmt::format("{}: {} {}", key, value, rule));
}

}  // namespace

std::string OneOf(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

Status CheckOneOf(const std::string& key, const std::string& value, const std::vector<std::string>& names) {
  if (std::find(names.begin(), names.end(), value) != names.end()) return Status::Ok();
  return InvalidArgument(fmt::format("{}: '{}' is not one of {}", key, value, OneOf(names)));
}

Status ValidateCuda(CudaConfig& cu) {
  if (cu.gemm_autotune == "1") cu.gemm_autotune = "on";
  if (cu.gemm_autotune == "0") cu.gemm_autotune = "off";
  HT_RETURN_IF_ERROR(CheckOneOf("cuda.gemm_autotune", cu.gemm_autotune, GemmAutotuneNames()));
  // The cap is passed on in bytes; 1 TiB is far above any device.
  return Check(cu.cudnn_bwd_workspace_mb >= 1 && cu.cudnn_bwd_workspace_mb <= (int64_t{1} << 20),
               "cuda.cudnn_bwd_workspace_mb", cu.cudnn_bwd_workspace_mb, "must be between 1 and 1048576 (MiB)");
}

Status ValidateRanges(const TrainConfig& c, int64_t seed, int64_t depth) {
  const OptimConfig& o = c.optim;
  HT_RETURN_IF_ERROR(Check(c.max_steps >= 1, "trainer.max_steps", c.max_steps, "must be >= 1"));
  HT_RETURN_IF_ERROR(Check(c.log_every_n_steps >= 1, "trainer.log_every_n_steps", c.log_every_n_steps, "must be >= 1"));
  HT_RETURN_IF_ERROR(Check(c.peak_tflops >= 0, "trainer.peak_tflops", c.peak_tflops, "must be >= 0"));
  HT_RETURN_IF_ERROR(Check(c.devices >= 1, "trainer.devices", c.devices, "must be >= 1"));
  HT_RETURN_IF_ERROR(Check(c.profile.start_step >= 0, "trainer.profile.start_step", c.profile.start_step, "must be >= 0"));
  HT_RETURN_IF_ERROR(Check(c.profile.num_steps >= 0 && c.profile.num_steps <= contract::kMaxProfileSteps,
                           "trainer.profile.num_steps", c.profile.num_steps,
                           fmt::format("must be in [0, {}] (0 = off)", contract::kMaxProfileSteps)));
  HT_RETURN_IF_ERROR(Check(c.num_nodes >= 1, "trainer.num_nodes", c.num_nodes, "must be >= 1"));
  HT_RETURN_IF_ERROR(Check(c.loss_scale.initial_scale > 0, "trainer.loss_scale.initial_scale", c.loss_scale.initial_scale, "must be > 0"));
  HT_RETURN_IF_ERROR(Check(c.loss_scale.growth_interval >= 1, "trainer.loss_scale.growth_interval", c.loss_scale.growth_interval, "must be >= 1"));
  HT_RETURN_IF_ERROR(Check(c.train_batch_size >= 1, "model.train_batch_size", c.train_batch_size, "must be >= 1"));
  // At most 2^26 tokens per micro-batch keeps every activation size (and the
  // memory plan) within int64; a max_context_width out of its own range is
  // model.Validate's error.
  constexpr int64_t kMaxMicroBatchTokens = int64_t{1} << 26;
  const int64_t seq = c.seq_len() >= 1 && c.seq_len() <= (int64_t{1} << 20) ? c.seq_len() : 1;
  HT_RETURN_IF_ERROR(Check(c.train_batch_size <= kMaxMicroBatchTokens / seq,
                           "model.train_batch_size", c.train_batch_size,
                           fmt::format("x model.max_context_width {} must be <= {} tokens per micro-batch", c.seq_len(),
                                       kMaxMicroBatchTokens)));
  HT_RETURN_IF_ERROR(Check(c.grad_accumulation_steps >= 1, "model.grad_accumulation_steps", c.grad_accumulation_steps, "must be >= 1"));
  HT_RETURN_IF_ERROR(Check(c.grad_clip >= 0, "model.grad_clip", c.grad_clip, "must be >= 0 (0 = off)"));
  HT_RETURN_IF_ERROR(Check(c.shard_degree >= 0, "model.shard_degree", c.shard_degree, "must be >= 0 (0 = one node)"));
  HT_RETURN_IF_ERROR(Check(c.collective_timeout_s > 0, "model.collective_timeout", c.collective_timeout_s, "must be > 0 seconds"));
  HT_RETURN_IF_ERROR(Check(seed >= 0, "model.seed", seed, "must be >= 0"));
  HT_RETURN_IF_ERROR(Check(o.lr > 0, "model.optim.lr", o.lr, "must be > 0"));
  HT_RETURN_IF_ERROR(Check(o.weight_decay >= 0, "model.optim.weight_decay", o.weight_decay, "must be >= 0"));
  HT_RETURN_IF_ERROR(Check(o.beta1 >= 0 && o.beta1 < 1, "model.optim.betas[0]", o.beta1, "must be in [0, 1)"));
  HT_RETURN_IF_ERROR(Check(o.beta2 >= 0 && o.beta2 < 1, "model.optim.betas[1]", o.beta2, "must be in [0, 1)"));
  HT_RETURN_IF_ERROR(Check(o.eps > 0, "model.optim.eps", o.eps, "must be > 0"));
  HT_RETURN_IF_ERROR(Check(o.warmup_steps >= 0, "model.optim.sched.warmup_steps", o.warmup_steps, "must be >= 0"));
  HT_RETURN_IF_ERROR(Check(o.constant_steps >= 0, "model.optim.sched.constant_steps", o.constant_steps, "must be >= 0"));
  HT_RETURN_IF_ERROR(Check(o.decay_steps >= 0, "model.lr_decay_iters", o.decay_steps, "must be >= 0 (0 = trainer.max_steps)"));
  HT_RETURN_IF_ERROR(Check(o.min_lr >= 0 && o.min_lr <= o.lr, "model.optim.sched.min_lr", o.min_lr, "must be in [0, model.optim.lr]"));
  HT_RETURN_IF_ERROR(Check(depth >= 1 && depth <= 64, "model.data.prefetch_depth", depth, "must be in [1, 64]"));
  const CheckpointConfig& k = c.checkpoint;
  HT_RETURN_IF_ERROR(Check(k.every_n_train_steps >= 0, "exp_manager.every_n_train_steps", k.every_n_train_steps, "must be >= 0"));
  HT_RETURN_IF_ERROR(Check(k.every_n_minutes >= 0, "exp_manager.every_n_minutes", k.every_n_minutes, "must be >= 0"));
  HT_RETURN_IF_ERROR(Check(c.save_top_k >= -1, "exp_manager.checkpoint_callback_params.save_top_k", c.save_top_k,
                           "must be >= 1, -1 (keep all) or 0 (no sharded checkpoints)"));
  const ValidationConfig& v = c.validation;
  HT_RETURN_IF_ERROR(Check(v.check_interval >= 0, "trainer.val_check_interval", v.check_interval, "must be >= 0"));
  HT_RETURN_IF_ERROR(Check(c.model.max_position_embeddings >= 0, "model.max_position_embeddings",
                           c.model.max_position_embeddings, "must be >= 0 (0 = model.max_context_width)"));
  HT_RETURN_IF_ERROR(Check(v.limit_batches >= 0, "trainer.limit_val_batches", v.limit_batches, "must be >= 0 (0 = off)"));
  HT_RETURN_IF_ERROR(Check(v.batch_size >= 1 && v.batch_size <= kMaxMicroBatchTokens / seq,
                           "model.val_batch_size", v.batch_size,
                           fmt::format("must be >= 1 and x model.max_context_width <= {} tokens", kMaxMicroBatchTokens)));
  HT_RETURN_IF_ERROR(Check(k.export_every_n_train_steps >= 0, "exp_manager.export_full_model.every_n_train_steps",
                           k.export_every_n_train_steps, "must be >= 0 (0 = off)"));
  HT_RETURN_IF_ERROR(Check(k.auto_max_overhead > 0 && k.auto_max_overhead < 1, "exp_manager.auto_checkpoint.max_overhead",
                           k.auto_max_overhead, "must be in (0, 1)"));
  HT_RETURN_IF_ERROR(Check(k.auto_max_lost_minutes > 0, "exp_manager.auto_checkpoint.max_lost_minutes",
                           k.auto_max_lost_minutes, "must be > 0"));
  HT_RETURN_IF_ERROR(Check(k.auto_min_interval_s >= 0, "exp_manager.auto_checkpoint.min_interval_s",
                           k.auto_min_interval_s, "must be >= 0"));
  if (k.export_dtype != "bf16" && k.export_dtype != "fp32") {
    return InvalidArgument(fmt::format("exp_manager.checkpoint.export_hf_dtype: '{}' is not one of bf16, fp32", k.export_dtype));
  }
  const DistributedConfig& d = c.distributed;
  HT_RETURN_IF_ERROR(Check(d.rendezvous_timeout_s >= 1 && d.rendezvous_timeout_s <= 86400,
                           "distributed.rendezvous_timeout_s", d.rendezvous_timeout_s, "must be in [1, 86400]"));
  for (auto [kind, k] : {std::pair{"shard", &d.nccl_shard}, {"replica", &d.nccl_replica}, {"world", &d.nccl_world}}) {
    HT_RETURN_IF_ERROR(Check(k->max_ctas >= 0 && k->max_ctas <= 64, fmt::format("distributed.nccl.{}.max_ctas", kind),
                             k->max_ctas, "must be in 1..64 (0 = NCCL's default)"));
    if (k->priority != "high" && k->priority != "low") {
      return InvalidArgument(
          fmt::format("distributed.nccl.{}.priority: '{}' is not one of high, low", kind, k->priority));
    }
  }
  if (d.replica_reduce != "overlap" && d.replica_reduce != "after") {
    return InvalidArgument(fmt::format("distributed.replica_reduce: '{}' is not one of overlap, after", d.replica_reduce));
  }
  return Status::Ok();
}

// Cross-key rules and the fix-ups that follow from them.
Status ValidateAndFinish(TrainConfig& c) {
  if (c.fp8.enabled && c.precision != model::Precision::kBF16) {
    return InvalidArgument(fmt::format("model.fp8: FP8 GEMMs run inside bf16 training; trainer.precision is {} (use bf16)",
                                       model::PrecisionName(c.precision)));
  }
  if (c.backend != "auto" && c.backend != "cpu" && c.backend != "cuda") {
    return InvalidArgument(fmt::format("trainer.backend: '{}' is not one of auto, cpu, cuda", c.backend));
  }
  if (c.optim.name != "adamw" && c.optim.name != "AdamW") {
    return InvalidArgument(fmt::format("model.optim.name: '{}' is not one of adamw", c.optim.name));
  }
  const FinetuneConfig& ft = c.finetune;
  if (!ft.hf_model_name_or_path.empty() && !ft.do_finetune) {
    return InvalidArgument(fmt::format(
        "model.hf_model_name_or_path: '{}' is set but model.do_finetune is false: set model.do_finetune: true to "
        "start from these weights, or remove the path",
        ft.hf_model_name_or_path));
  }
  if (ft.do_finetune && ft.hf_model_name_or_path.empty()) {
    return InvalidArgument(
        "model.do_finetune: true needs model.hf_model_name_or_path (a local Hugging Face model directory with "
        "config.json and *.safetensors)");
  }
  HT_RETURN_IF_ERROR(ft.peft.Validate());
  if (ft.peft.enabled() && ft.peft.fp8_base && c.precision != model::Precision::kBF16) {
    return InvalidArgument(fmt::format("model.peft.fp8_base: FP8 GEMMs run inside bf16 training; "
                                       "trainer.precision is {} (use bf16)",
                                       model::PrecisionName(c.precision)));
  }
  if (ft.peft.enabled() && ft.peft.fp8_base && c.backend == "cpu") {
    return InvalidArgument("model.peft.fp8_base needs the CUDA backend (FP8 tensor cores); "
                           "trainer.backend is cpu");
  }
  if (ft.peft.enabled() && c.fp8.enabled) {
    return InvalidArgument(fmt::format(
        "model.fp8: PEFT ({}) does not support FP8 (as the HyperPod recipes say); set model.fp8: false",
        model::PeftTypeName(ft.peft.type)));
  }
  if (ft.do_finetune && !c.checkpoint.hf_init_from.empty()) {
    return InvalidArgument("exp_manager.hf_init_from and model.hf_model_name_or_path both name initial weights; give one");
  }
  if (!c.data.use_synthetic_data && c.data.train_dir.empty()) {
    return InvalidArgument("model.data.train_dir: required unless model.data.use_synthetic_data is true");
  }
  if (c.data.use_synthetic_data && !c.data.train_dir.empty()) {
    c.notes.push_back(fmt::format("model.data.use_synthetic_data: true wins over model.data.train_dir ({}): "
                                  "training on synthetic data, the directory is not read",
                                  c.data.train_dir));
  }
  if (c.exp_dir.empty()) {
    // Else checkpoints would go to /checkpoints and metrics to the working directory.
    return InvalidArgument("exp_manager.exp_dir: empty: give the directory for checkpoints, metrics and logs "
                           "(default ./exp)");
  }
  while (c.checkpoint_dir.size() > 1 && c.checkpoint_dir.back() == '/') c.checkpoint_dir.pop_back();
  if (c.checkpoint_dir.empty()) c.checkpoint_dir = c.exp_dir + "/checkpoints";
  if (c.checkpoint.export_dir.empty()) c.checkpoint.export_dir = c.checkpoint_dir + "/full";
  if (c.finetune.adapter_dir.empty()) c.finetune.adapter_dir = c.exp_dir + "/adapter";
  CheckpointConfig& k = c.checkpoint;
  if (k.auto_interval) {
    if (k.every_n_train_steps > 0 || k.every_n_minutes > 0) {
      c.notes.push_back(fmt::format(
          "exp_manager.auto_checkpoint.enabled: the fixed interval (every_n_train_steps {}, every_n_minutes {}) "
          "is replaced by the measured one",
          k.every_n_train_steps, k.every_n_minutes));
    }
    k.every_n_train_steps = 0;
    k.every_n_minutes = 0;
    if (!k.enabled) return InvalidArgument(fmt::format("exp_manager.auto_checkpoint.enabled: true but {} turns sharded checkpoints off", k.disabled_by));
  }
  if (!k.enabled) {
    c.notes.push_back(fmt::format("{}: no sharded checkpoints are written, so a restarted job starts over{}",
                                  k.disabled_by,
                                  k.export_every_n_train_steps > 0 || k.export_save_last
                                      ? " (full-model HF exports still go to " + k.export_dir + ")"
                                      : ""));
  }
  const ValidationConfig& v = c.validation;
  if (v.val_dir.empty() && v.limit_batches > 0) {
    return InvalidArgument(fmt::format(
        "trainer.limit_val_batches: {} asks for validation but model.data.val_dir is not set (set it, or 0 = off)",
        v.limit_batches));
  }
  if (!v.val_dir.empty() && v.limit_batches > 0 && v.check_interval == 0) {
    return InvalidArgument("trainer.val_check_interval: 0 with validation on (model.data.val_dir, "
                           "trainer.limit_val_batches > 0): give the steps between evaluations");
  }
  if (!v.val_dir.empty() && v.limit_batches == 0) {
    c.notes.push_back("model.data.val_dir is set but trainer.limit_val_batches is 0: validation is off");
  }
  return c.model.Validate();
}

}  // namespace hypertrain::config::internal

namespace hypertrain::config {

// Must match kernels::cuda::ParseGemmAutotune (the CUDA backend parses the
// validated value; backend_test checks every name).
const std::vector<std::string>& GemmAutotuneNames() {
  static const std::vector<std::string> kNames = {"on", "off", "verbose"};
  return kNames;
}

}  // namespace hypertrain::config
