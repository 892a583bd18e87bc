#include "runtime/train/trainer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/startup_phases.h"
#include "runtime/data/manifest.h"
#include "runtime/model/math.h"
#include "runtime/train/lr_schedule.h"
#include "runtime/train/nvtx.h"
#include "runtime/trace/tracing_hooks.h"

namespace hypertrain::train {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kHost = trace::Recorder::kHostTrack;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Every rank stops after the step they agreed on: it is saved when the save
// fits in what is left of the grace budget on every rank (a rank whose peer
// was signalled has its whole budget; the signalled one less).
Status StopAfterStep(const LoopContext& ctx, const TrainState& state, TrainSummary* summary) {
  const double need = ctx.checkpoint != nullptr ? ctx.checkpoint->EstimatedSaveSeconds() : 0;
  const double left = ctx.termination->SecondsLeft();
  // Half again the estimate plus a second: the save must be durable before
  // the SIGKILL, and the estimate is one earlier save (or a guess).
  const bool fits = need * 1.5 + 1.0 <= left;
  HT_ASSIGN_OR_RETURN(const bool too_tight, ctx.hooks->AnyAcrossRanks(!fits));
  const bool save = ctx.checkpoint != nullptr && !too_tight;
  if (ctx.log) {
    spdlog::warn("stopping after step {} on request: {}", state.step,
                 ctx.checkpoint == nullptr ? std::string("no checkpointing")
                 : save ? fmt::format("saving it (estimated {:.1f} s, {:.1f} s of the grace budget left)",
                                      need, left)
                        : fmt::format("NOT saving it: the save (estimated {:.1f} s) does not fit in the "
                                      "grace budget left on every rank ({:.1f} s here)",
                                      need, left));
  }
  if (ctx.checkpoint != nullptr) {
    HT_RETURN_IF_ERROR(ctx.checkpoint->Stop(*ctx.backend, state, save));
  }
  summary->saved_at_stop = save;
  const int sig = ctx.termination->signal();
  summary->stopped_by_signal = sig != 0 ? sig : 15;  // a peer's stop: as for SIGTERM
  return Status::Ok();
}

// The time to first step and the start-up phases: one log line now, and the
// next metrics.jsonl record (the progress report reads it from there).
void ReportStartup(const LoopContext& ctx, int64_t step) {
  const startup::Summary s = startup::Summarize(startup::SecondsSinceExec());
  if (ctx.log) spdlog::info("start-up: {} (step {})", startup::FormatSummary(s), step);
  if (ctx.metrics != nullptr) ctx.metrics->AttachStartup(s);
}

// The MFU numerator: full training's, or PEFT's (a frozen base has no weight
// gradients: runtime/model/peft.h).
double FlopsPerToken(const config::TrainConfig& c) {
  if (c.finetune.peft.enabled()) {
    StatusOr<double> f = model::PeftTrainFlopsPerToken(c.model, c.finetune.peft, c.seq_len());
    if (f.ok()) return *f;
  }
  return c.model.TrainFlopsPerToken(c.seq_len());
}

// The first step after a resume: its log line and <exp_dir>/recovery.json,
// which node 0's launcher reports (contract::Recovery).
Status WriteRecovery(const LoopContext& ctx, int64_t step, double first_step_s) {
  RecoveryMetrics& r = *ctx.recovery;
  r.step = step;
  r.first_step_s = first_step_s;
  r.trainer_s = Seconds(ctx.trainer_start, Clock::now());
  if (ctx.log) {
    spdlog::info("recovery: step {} (resumed from step {}) {:.2f} s after the trainer started: rendezvous {:.2f} s, "
                 "checkpoint load {:.2f} s ({:.2f} GB/s on this rank), first step {:.2f} s",
                 step, r.resumed_from_step, r.trainer_s, r.rendezvous_s, r.checkpoint_load_s,
                 r.checkpoint_load_gbps, r.first_step_s);
  }
  return ctx.metrics != nullptr ? ctx.metrics->WriteRecovery(r) : Status::Ok();
}

}  // namespace

StatusOr<TrainSummary> RunTrainingLoop(const config::TrainConfig& c, LoopContext& ctx,
                                       TrainState& state) {
  model::Backend& backend = *ctx.backend;
  model::UnitHooks& hooks = *ctx.hooks;
  data::DataLoader& loader = *ctx.loader;
  const int U = backend.layout().num_units();
  const int64_t A = c.grad_accumulation_steps;
  const int64_t seq = c.seq_len();
  const int64_t tokens_per_step = c.train_batch_size * A * seq * ctx.data_world;
  const double flops_per_token = FlopsPerToken(c);
  const double peak = c.peak_tflops > 0 ? c.peak_tflops * 1e12 : backend.PeakFlops();
  LrSchedule sched{c.optim.sched, c.optim.lr, c.optim.min_lr, c.optim.warmup_steps,
                   c.optim.DecayEnd(c.max_steps)};
  LossScaler scaler(c.loss_scale);
  if (state.step > 0) scaler.set_state(state.scaler);

  StepTracer off;
  StepTracer& tracer = ctx.tracer != nullptr ? *ctx.tracer : off;
  TrainSummary summary;
  const auto start = Clock::now();
  auto interval_start = start;
  double interval_wait = 0;
  double interval_ckpt_stall = 0;  // seconds in checkpoint AfterStep since the last record
  int64_t interval_steps = 0;
  int consecutive_nonfinite = 0;
  loader.TakeWaitSeconds();
  // The first step of this process (GEMM autotuning and lazy plans happen in
  // it) closes the start-up: its summary is logged and written once.
  std::optional<startup::PhaseTimer> first_step;
  if (state.step < c.max_steps) first_step.emplace("first_step");
  while (state.step < c.max_steps) {
    const auto step_start = Clock::now();
    tracer.BeginStep(state.step + 1);
    trace::Recorder* const tr = tracer.recording();  // null outside trainer.profile's window
    // Pooled HSDP overwrites every gradient shard on micro-batch 0 (and
    // holds no full-size gradient between steps): zeroing is wasted bandwidth.
    if (!hooks.OverwritesShardGrads()) HT_RETURN_IF_ERROR(backend.ZeroGrads());
    const double loss_scale = scaler.scale();
    double loss = 0;
    for (int64_t m = 0; m < A; ++m) {
      data::Batch* batch;
      {
        NvtxRange r("data");
        trace::Span s(tr, kHost, "data");
        HT_ASSIGN_OR_RETURN(batch, loader.Next());
      }
      HT_RETURN_IF_ERROR(hooks.BeginMicroBatch(static_cast<int>(m), m == A - 1));
      // Dropout masks follow the global micro-batch number, so a resumed run,
      // or the same global batch split over other ranks, draws the same.
      batch->view.rng_offset =
          static_cast<uint64_t>((state.step * ctx.data_world + ctx.data_rank) * A + m);
      StatusOr<double> l = [&] {
        NvtxRange r("forward_backward");
        trace::Span s(tr, kHost, "forward_backward");
        return backend.ForwardBackward(batch->view, static_cast<float>(loss_scale / A), hooks);
      }();
      loader.Release(batch);
      if (!l.ok()) return l.status();
      loss += *l / A;
    }
    HT_RETURN_IF_ERROR(hooks.FinishGradients());
    double grad_norm, lr = sched.At(state.step);
    bool applied;
    {
      NvtxRange r("optimizer");
      trace::Span s(tr, kHost, "optimizer");
      HT_ASSIGN_OR_RETURN(double local, backend.TotalGradSumSquares());
      HT_ASSIGN_OR_RETURN(double sumsq, hooks.GlobalSumSquares(local));
      grad_norm = std::sqrt(sumsq) / loss_scale;
      applied = scaler.Update(std::isfinite(grad_norm));
      if (applied) {
        const double clip = model::ClipFactor(grad_norm, c.grad_clip);
        kernels::AdamWParams p;
        p.lr = static_cast<float>(lr);
        p.beta1 = static_cast<float>(c.optim.beta1);
        p.beta2 = static_cast<float>(c.optim.beta2);
        p.eps = static_cast<float>(c.optim.eps);
        p.weight_decay = static_cast<float>(c.optim.weight_decay);
        p.step = static_cast<int>(++state.adam_step);
        p.grad_scale = static_cast<float>(clip / loss_scale);
        // Unit 0 (the embedding, needed first by the next pass) first: the
        // hooks may start its gather while the other units are stepped.
        for (int u = 0; u < U; ++u) {
          HT_RETURN_IF_ERROR(backend.OptimizerStep(u, p));
          HT_RETURN_IF_ERROR(hooks.AfterOptimizerStep(u));
        }
      }
      HT_RETURN_IF_ERROR(backend.Synchronize());
    }
    HT_ASSIGN_OR_RETURN(loss, hooks.MeanAcrossDataParallel(loss));
    if (first_step) {
      first_step.reset();  // records it
      ReportStartup(ctx, state.step + 1);
    }
    ++state.step;
    state.tokens_seen += tokens_per_step;
    state.scaler = scaler.state();
    state.data = loader.state();
    summary.losses.push_back(loss);
    ++summary.steps_run;
    if (!applied) {
      ++summary.skipped_steps;
      if (!scaler.enabled() && ++consecutive_nonfinite >= 3) {
        return Internal(fmt::format("step {}: non-finite gradients 3 steps in a row without fp16 "
                                    "loss scaling (loss {}); the run diverged",
                                    state.step, loss));
      }
      spdlog::warn("step {}: non-finite gradient norm; update skipped{}", state.step,
                   scaler.enabled() ? fmt::format(", loss scale now {}", scaler.scale()) : "");
    } else {
      consecutive_nonfinite = 0;
    }
    if (ctx.recovery != nullptr && summary.steps_run == 1) {
      HT_RETURN_IF_ERROR(WriteRecovery(ctx, state.step, Seconds(step_start, Clock::now())));
    }
    ++interval_steps;
    interval_wait += loader.TakeWaitSeconds();
    if (state.step % c.log_every_n_steps == 0 || state.step == c.max_steps) {
      trace::Span s(tr, kHost, "log");
      const auto now = Clock::now();
      const double dt = Seconds(interval_start, now) / interval_steps;
      StepMetrics m;
      m.step = state.step;
      m.max_steps = c.max_steps;
      m.loss = loss;
      m.lr = lr;
      m.grad_norm = grad_norm;
      m.loss_scale = loss_scale;
      m.skipped = !applied;
      m.step_time_s = dt;
      m.tokens_per_s = tokens_per_step / dt;
      m.tokens_per_s_per_device = m.tokens_per_s / ctx.world_size;
      m.mfu = peak > 0 ? flops_per_token * m.tokens_per_s_per_device / peak : 0.0;
      m.data_wait_s = interval_wait / interval_steps;
      m.checkpoint_stall_s = interval_ckpt_stall;
      m.memory_bytes = backend.PeakMemoryBytes();
      m.eta_s = dt * static_cast<double>(c.max_steps - state.step);
      m.tokens_seen = state.tokens_seen;
      if (ctx.log) spdlog::info("{}", FormatStepLine(m));
      if (ctx.metrics != nullptr) HT_RETURN_IF_ERROR(ctx.metrics->Write(m));
      interval_start = now;
      interval_steps = 0;
      interval_wait = 0;
      interval_ckpt_stall = 0;
    }
    if (ctx.validator != nullptr &&
        (state.step % c.validation.check_interval == 0 || state.step == c.max_steps)) {
      HT_ASSIGN_OR_RETURN(ValMetrics v, ctx.validator->Run(state.step, backend, hooks));
      summary.validations.push_back(v);
      summary.validation_seconds += v.seconds;
      if (ctx.log) {
        spdlog::info("val step {} | val/loss {:.4f} | perplexity {:.3f} | {} batches, {} tokens | {:.2f} s "
                     "({:.1f}% of the run so far)",
                     v.step, v.loss, std::exp(v.loss), v.batches, v.tokens, v.seconds,
                     100.0 * summary.validation_seconds / std::max(1e-9, Seconds(start, Clock::now())));
      }
      if (ctx.metrics != nullptr) HT_RETURN_IF_ERROR(ctx.metrics->WriteValidation(v));
      interval_start += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(v.seconds));
    }
    if (ctx.termination != nullptr) {
      HT_ASSIGN_OR_RETURN(const bool stop, hooks.AnyAcrossRanks(ctx.termination->requested()));
      if (stop) {
        HT_RETURN_IF_ERROR(StopAfterStep(ctx, state, &summary));
        summary.seconds = Seconds(start, Clock::now());
        return summary;
      }
    }
    if (ctx.checkpoint != nullptr) {
      trace::Span s(tr, kHost, "checkpoint");
      const auto before = Clock::now();
      HT_RETURN_IF_ERROR(ctx.checkpoint->AfterStep(backend, state));
      interval_ckpt_stall += Seconds(before, Clock::now());  // snapshot time; the write is asynchronous
    }
    HT_RETURN_IF_ERROR(tracer.EndStep(loss, state.tokens_seen));
  }
  if (ctx.checkpoint != nullptr) HT_RETURN_IF_ERROR(ctx.checkpoint->Finish(backend, state));
  summary.seconds = Seconds(start, Clock::now());
  return summary;
}

model::BackendOptions BackendOptionsFor(const config::TrainConfig& c) {
  model::BackendOptions o;
  o.precision = c.precision;
  o.checkpointing = c.activation_checkpointing;
  o.micro_batch_size = c.train_batch_size;
  o.seq_len = c.seq_len();
  o.seed = c.seed;
  o.single_pass_grads = c.grad_accumulation_steps == 1;
  o.deterministic = c.deterministic;
  o.fp8 = c.fp8;
  o.peft = c.finetune.peft;
  return o;
}

StatusOr<TrainSummary> RunTrainJob(const config::TrainConfig& c, TrainParts parts) {
  if (parts.parallel == nullptr || parts.backend.backend == nullptr || parts.hooks == nullptr ||
      parts.checkpoint == nullptr) {
    return Internal(fmt::format("training job assembled without its {}",
                                parts.parallel == nullptr         ? "parallel runtime"
                                : parts.backend.backend == nullptr ? "backend"
                                : parts.hooks == nullptr           ? "unit hooks"
                                                                   : "checkpoint hooks"));
  }
  ParallelRuntime* par = parts.parallel.get();
  const bool logging_rank = par->rank() == 0;
  BackendBundle& bundle = parts.backend;
  model::Backend& backend = *bundle.backend;
  CheckpointHooks* ckpt = parts.checkpoint.get();
  // trainer.profile (the assembly made the recorder and handed it to the
  // backend and the process groups): the unit hooks' structure is recorded too.
  trace::Recorder* recorder = parts.recorder.get();
  std::unique_ptr<trace::TracingHooks> traced_hooks;
  if (recorder != nullptr) {
    std::vector<std::string> names;
    for (const auto& u : backend.layout().units()) names.push_back(u.name);
    traced_hooks = std::make_unique<trace::TracingHooks>(*parts.hooks, *recorder, std::move(names));
  }

  TrainState state;
  state.data.seed = c.seed;
  state.scaler.scale = c.loss_scale.enabled ? c.loss_scale.initial_scale : 1.0;
  data::LoaderOptions lo;
  lo.train_dir = c.data.train_dir;
  if (!c.data.tokenizer.empty() && !c.data.use_synthetic_data) {
    HT_ASSIGN_OR_RETURN(lo.tokenizer_sha256, data::TokenizerJsonSha256(c.data.tokenizer));
  }
  lo.synthetic = c.data.use_synthetic_data;
  lo.vocab_size = c.model.vocab_size;
  lo.micro_batch = c.train_batch_size;
  lo.seq = c.seq_len();
  lo.grad_accum = c.grad_accumulation_steps;
  lo.rank = par->data_rank();
  lo.dp_world = par->data_world();
  lo.prefetch_depth = c.data.prefetch_depth;
  // The validation set is checked before the checkpoint is read and any step
  // runs (its errors name model.data.val_dir).
  std::unique_ptr<Validator> validator;
  if (c.validation.enabled()) {
    validator = std::make_unique<Validator>(c, lo, bundle.allocator, bundle.stager);
    HT_RETURN_IF_ERROR(validator->Check());
  }
  startup::PhaseTimer restore_phase("checkpoint_restore");
  const auto restore_start = std::chrono::steady_clock::now();
  HT_ASSIGN_OR_RETURN(bool resumed, ckpt->Restore(backend, state));
  restore_phase.End();
  RecoveryMetrics recovery;
  if (resumed) {
    const CheckpointHooks::LoadStats load = ckpt->RestoreStats();
    recovery.resumed_from_step = state.step;
    recovery.rendezvous_s = parts.rendezvous_seconds;
    recovery.checkpoint_load_s = Seconds(restore_start, std::chrono::steady_clock::now());
    if (load.seconds > 0) recovery.checkpoint_load_gbps = 1e-9 * static_cast<double>(load.bytes) / load.seconds;
  }
  if (resumed && logging_rank) {
    spdlog::info("resumed at step {} ({} tokens seen)", state.step, state.tokens_seen);
  }
  lo.state = state.data;
  startup::PhaseTimer loader_phase("data_loader");
  HT_ASSIGN_OR_RETURN(std::unique_ptr<data::DataLoader> loader,
                      data::DataLoader::Create(lo, bundle.allocator, bundle.stager));
  loader_phase.End();

  std::unique_ptr<MetricsWriter> metrics;
  if (logging_rank) {
    HT_ASSIGN_OR_RETURN(metrics, MetricsWriter::Create(c.exp_dir, c.tensorboard));
    const int64_t seq = c.seq_len();
    const int64_t global_batch = c.train_batch_size * c.grad_accumulation_steps * par->data_world();
    spdlog::info("model: {}", c.model.Summary());
    spdlog::info("backend {} | precision {} | activation checkpointing {} | {} | world {} | "
                 "global batch {} x {} = {} tokens/step",
                 backend.name(), model::PrecisionName(c.precision),
                 model::CheckpointingName(c.activation_checkpointing),
                 c.deterministic ? "deterministic" : "not deterministic", par->world_size(),
                 global_batch, seq, global_batch * seq);
    if (c.fp8.enabled && backend.Fp8Scaling() != nullptr) {
      spdlog::info("fp8: block GEMMs in FP8 (e4m3 forward, {} gradients), recipe {}{}, weights "
                   "scaled by their own amax, {}",
                   model::Fp8FormatName(c.fp8.grad_format), model::Fp8RecipeName(c.fp8.recipe),
                   c.fp8.recipe == model::Fp8Recipe::kDelayed
                       ? fmt::format(" (amax history {}, {})", c.fp8.amax_history_len,
                                     model::AmaxComputeAlgoName(c.fp8.amax_compute_algo))
                       : std::string(),
                   c.fp8.lm_head ? "LM head GEMMs in FP8 (backward from the second pass)"
                                 : "LM head bf16");
    } else if (c.fp8.enabled) {
      spdlog::warn("model.fp8: the {} backend has no FP8 path and computes as for {} (the CPU "
                   "reference: fp32); FP8 GEMMs need a CUDA GPU with FP8 tensor cores",
                   backend.name(), model::PrecisionName(c.precision));
    }
    if (const model::ParamLayout* base = backend.BaseLayout()) {
      spdlog::info("peft: {} | {} trainable adapter parameters ({:.3f}% of the {} frozen) | base {}",
                   c.finetune.peft.Summary(), backend.layout().total_param_numel(),
                   100.0 * static_cast<double>(backend.layout().total_param_numel()) /
                       static_cast<double>(base->total_param_numel()),
                   base->total_param_numel(),
                   c.finetune.hf_model_name_or_path.empty()
                       ? std::string("randomly initialised (no model.hf_model_name_or_path: "
                                     "benchmarks only)")
                       : c.finetune.hf_model_name_or_path);
    }
    spdlog::info("FLOPs: {}*{} matmul params{} + 12*{}*{}*{} = {:.4g} per token (used for MFU); "
                 "Megatron formula (full recompute) {:.4g} per step",
                 c.finetune.peft.enabled() ? 4 : 6, c.model.NumMatmulParams(),
                 c.finetune.peft.enabled() ? " (frozen: no weight gradients) + 6*adapter params" : "",
                 c.model.num_hidden_layers, c.model.hidden_size, seq, FlopsPerToken(c),
                 c.model.MegatronFlopsPerIteration(global_batch, seq));
    if (!loader->packing_summary().empty()) {
      spdlog::info("data: SFT {}: {}", c.data.train_dir, loader->packing_summary());
    } else if (loader->num_tokens() > 0) {
      spdlog::info("data: {} tokens in {} ({} samples of {})", loader->num_tokens(),
                   c.data.train_dir, loader->num_samples(), seq + 1);
    } else {
      spdlog::info("data: synthetic");
    }
    spdlog::info("metrics: {} and {}", metrics->jsonl_path(), metrics->tensorboard_path());
  }
  if (validator != nullptr) {
    if (logging_rank) {
      spdlog::info("validation: {} every {} steps and at the end, {} micro-batches of {} per rank", c.validation.val_dir,
                   c.validation.check_interval, validator->passes(), c.train_batch_size);
    }
  }
  StepTracer tracer(recorder, c.profile, par, &backend);
  if (recorder != nullptr && logging_rank) {
    spdlog::info("trace: steps {}..{} (trainer.profile) to {}", c.profile.start_step + 1,
                 c.profile.start_step + c.profile.num_steps, recorder->options().dir);
  }
  LoopContext ctx;
  ctx.validator = validator.get();
  ctx.backend = &backend;
  ctx.hooks = traced_hooks != nullptr ? static_cast<model::UnitHooks*>(traced_hooks.get())
                                      : parts.hooks.get();
  ctx.tracer = &tracer;
  ctx.loader = loader.get();
  ctx.world_size = par->world_size();
  ctx.data_world = par->data_world();
  ctx.data_rank = par->data_rank();
  ctx.metrics = metrics.get();
  ctx.checkpoint = ckpt;
  ctx.log = logging_rank;
  ctx.termination = parts.termination;
  ctx.recovery = resumed ? &recovery : nullptr;
  ctx.trainer_start = parts.assembly_start.value_or(restore_start);
  if (parts.termination != nullptr) parts.termination->TrainingStarted();
  StatusOr<TrainSummary> run = RunTrainingLoop(c, ctx, state);
  // A run that failed mid-window still leaves its trace (what a hang or a
  // crash looked like); the loop's error wins over a write error.
  const Status traced = tracer.Finish();
  if (!run.ok()) return run.status();
  HT_RETURN_IF_ERROR(traced);
  TrainSummary s = std::move(*run);
  if (metrics != nullptr) HT_RETURN_IF_ERROR(metrics->Flush());
  if (logging_rank && s.stopped_by_signal != 0) {
    spdlog::warn("stopped on request after step {} ({} steps run this time); {}", state.step,
                 s.steps_run,
                 s.saved_at_stop ? "its checkpoint is written: the next start resumes at step " +
                                       std::to_string(state.step)
                                 : std::string("no checkpoint of it: the next start resumes from the "
                                               "newest earlier checkpoint"));
  } else if (logging_rank && s.steps_run == 0) {
    spdlog::info("done: nothing to do (step {} of max_steps {} reached already)", state.step,
                 c.max_steps);
  } else if (logging_rank) {
    spdlog::info("done: {} steps in {:.1f} s, final loss {:.4f}, data wait total {:.2f} s",
                 s.steps_run, s.seconds, s.losses.back(), loader->TotalWaitSeconds());
  }
  return s;
}

}  // namespace hypertrain::train
