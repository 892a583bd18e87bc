// hypertrain bench: training throughput of the CUDA backend on synthetic data.
//
//   bench                      # the two reference runs: 125m 16x2048, 1b 4x2048, bf16
//   bench --model 1b --batch 4 --seq 2048 --steps 30 --warmup 5
//         [--precision bf16|fp16|fp8] [--fp8-recipe delayed|tensorwise] [--fp8-grad e5m2|e4m3]
//         [--fp8-lm-head 0|1]
//         [--checkpointing none|selective|full]
//         [--graphs 0|1] [--share-grads 0|1] [--deterministic 0|1] [--json out.jsonl]
//         [--attention-impl auto|cudnn|cudnn-fast|cudnn-fwd|tiled|simple]
//         [--gemm-autotune on|off|verbose] [--cudnn-bwd-workspace-mb N]
//
// The kernel options default to the trainer's config keys cuda.attention_impl,
// cuda.gemm_autotune and cuda.cudnn_bwd_workspace_mb as their HT_* variables
// set them (config::CudaConfigFromEnv, the trainer's one mapping: the GPU
// scripts set HT_ATTENTION_IMPL, HT_GEMM_AUTOTUNE, HT_CUDNN_BWD_WORKSPACE_MB);
// the flags win over the variables.
//
// Per run it prints tokens/s, MFU (model FLOPs per token = 6 * matmul params
// incl. LM head + 12 * layers * hidden * seq, over the device's dense peak:
// H100/H200 989.4 TF/s bf16, A100 312, A10 125 -- datasheets), peak device
// memory (cudaMemGetInfo high-water mark, includes the CUDA context) and the
// per-phase step time: data wait, forward, backward (LM head + loss + blocks +
// embedding), optimizer (grad norm + AdamW). Times are CUDA-event device
// times, medians over the timed steps after warm-up; the step time is the
// host wall clock of a whole synchronised step. Tokens are random (fixed
// seed), staged through pinned buffers and the H2D stream like the loader's.
// --precision fp8 is bf16 training with the block GEMMs in FP8 (model.fp8);
// MFU stays against the bf16 peak. With --profile the block GEMMs' rate
// (TFLOP/s over their 6 * N * block-params FLOPs) and the FP8 cast time are
// printed too.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/cli.h"
#include "runtime/bench/bench.h"
#include "runtime/backends/cuda/backend.h"
#include "runtime/config/config.h"
#include "runtime/model/config.h"

namespace hypertrain::bench {
namespace {

struct RunSpec {
  std::string model = "125m";
  int64_t batch = 16, seq = 2048;
  int steps = 20, warmup = 5;
  model::Precision precision = model::Precision::kBF16;
  model::ActivationCheckpointing checkpointing = model::ActivationCheckpointing::kNone;
  bool graphs = false;
  bool profile = false;  // per-op device times (adds events between ops)
  int64_t loss_chunk_rows = 0;  // 0 = the backend's choice (CudaOptions::loss_chunk_rows)
  bool share_grads = true;  // block gradients in freed activations (one micro-batch per step)
  bool deterministic = true;  // as trainer.deterministic; 0 = cuDNN's atomic-dQ attention backward
  model::Fp8Options fp8;      // --precision fp8
  config::CudaConfig kernels;  // cuda.* keys: HT_* variables, then flags
};

std::string PrecisionLabel(const RunSpec& r) {
  if (!r.fp8.enabled) return model::PrecisionName(r.precision);
  return std::string("fp8-") + model::Fp8RecipeName(r.fp8.recipe) + "-" +
         model::Fp8FormatName(r.fp8.grad_format) + (r.fp8.lm_head ? "-head" : "");
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Run(const RunSpec& r, const std::string& json_path) {
  auto cfg_or = model::NamedModelConfig(r.model);
  if (!cfg_or.ok()) {
    spdlog::error("bench: {}", cfg_or.status().ToString());
    return 2;
  }
  model::ModelConfig cfg = *cfg_or;
  if (r.seq > cfg.max_context_width) cfg.max_context_width = r.seq;
  model::BackendOptions o;
  o.precision = r.precision;
  o.checkpointing = r.checkpointing;
  o.micro_batch_size = r.batch;
  o.seq_len = r.seq;
  o.single_pass_grads = true;  // ZeroGrads + one ForwardBackward per step, like the trainer at A = 1
  o.deterministic = r.deterministic;
  o.fp8 = r.fp8;
  cuda::CudaOptions co;
  co.share_grads_with_activations = r.share_grads;
  co.cuda_graphs = r.graphs;
  co.loss_chunk_rows = r.loss_chunk_rows;
  const Status knobs = cuda::SetKernelOptions(r.kernels.attention_impl,
                                              r.kernels.gemm_autotune, r.kernels.cudnn_bwd_workspace_mb, &co);
  if (!knobs.ok()) {
    spdlog::error("bench: {}", knobs.ToString());
    return 2;
  }
  auto b_or = cuda::CudaBackend::Create(cfg, o, co);
  if (!b_or.ok()) {
    spdlog::error("bench: {}", b_or.status().ToString());
    return 1;
  }
  cuda::CudaBackend& b = **b_or;
  if (r.profile) {
    const Status st = b.op_profile().Enable();
    if (!st.ok()) {
      spdlog::error("bench: {}", st.ToString());
      return 1;
    }
  }
  const int64_t n = r.batch * r.seq;
  // A few pinned batches, restaged every step (the copy overlaps nothing
  // here, but goes through the same path as training).
  constexpr int kBatches = 4;
  std::vector<data::Batch> batches(kBatches);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(cfg.vocab_size - 1));
  for (auto& batch : batches) {
    batch.inputs = static_cast<int32_t*>(b.host_allocator()->Allocate(n * sizeof(int32_t)));
    batch.targets = static_cast<int32_t*>(b.host_allocator()->Allocate(n * sizeof(int32_t)));
    if (!batch.inputs || !batch.targets) {
      spdlog::error("bench: pinned allocation failed");
      return 1;
    }
    for (int64_t i = 0; i < n; ++i) batch.inputs[i] = tok(rng), batch.targets[i] = tok(rng);
    batch.view = {batch.inputs, batch.targets, r.batch, r.seq, nullptr};
  }
  cudaEvent_t opt0, opt1;
  cudaEventCreate(&opt0);
  cudaEventCreate(&opt1);
  model::NoOpUnitHooks hooks;
  std::vector<double> step_ms, data_ms, fwd_ms, bwd_ms, opt_ms;
  double last_loss = 0;
  for (int step = 1; step <= r.warmup + r.steps; ++step) {
    data::Batch& batch = batches[step % kBatches];
    const auto t0 = std::chrono::steady_clock::now();
    Status st = b.stager()->Stage(batch);
    if (st.ok()) st = b.ZeroGrads();
    StatusOr<double> loss = st.ok() ? b.ForwardBackward(batch.view, 1.0f, hooks) : StatusOr<double>(st);
    if (!loss.ok()) {
      spdlog::error("bench: step {}: {}", step, loss.status().ToString());
      return 1;
    }
    last_loss = *loss;
    const cuda::PhaseTimes ph = b.last_phase_times();
    cudaEventRecord(opt0, b.stream());
    double sumsq = 0;
    if (st.ok()) {
      auto s = b.TotalGradSumSquares();
      if (!s.ok()) st = s.status(); else sumsq = *s;
    }
    kernels::AdamWParams p;
    p.lr = 3e-4f;
    p.weight_decay = 0.1f;
    p.step = step;
    p.grad_scale = static_cast<float>(std::min(1.0, 1.0 / (std::sqrt(sumsq) + 1e-6)));
    for (int u = 0; u < b.layout().num_units() && st.ok(); ++u) st = b.OptimizerStep(u, p);
    cudaEventRecord(opt1, b.stream());
    if (st.ok()) st = b.Synchronize();
    if (!st.ok()) {
      spdlog::error("bench: step {}: {}", step, st.ToString());
      return 1;
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (step == r.warmup) b.op_profile().Reset();
    if (step <= r.warmup) continue;
    float o_ms = 0;
    cudaEventElapsedTime(&o_ms, opt0, opt1);
    step_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    data_ms.push_back(ph.data_ms);
    fwd_ms.push_back(ph.forward_ms);
    bwd_ms.push_back(ph.backward_ms);
    opt_ms.push_back(o_ms);
  }
  for (auto& batch : batches) {
    b.host_allocator()->Free(batch.inputs);
    b.host_allocator()->Free(batch.targets);
  }
  const double step = Median(step_ms);
  const double tok_s = static_cast<double>(n) / (step / 1e3);
  const double flops_tok = cfg.TrainFlopsPerToken(r.seq);
  const double mfu = b.PeakFlops() > 0 ? flops_tok * tok_s / b.PeakFlops() : 0.0;
  const double gib = static_cast<double>(b.PeakMemoryBytes()) / (1u << 30);
  std::printf(
      "%-5s %s %lldx%lld ckpt=%s graphs=%d grads=%s det=%d | %9.0f tok/s | MFU %5.1f%% | peak mem %6.2f GiB "
      "(allocated %.2f GiB = act %.2f + state %.2f + other) | step %7.2f ms = data %.2f + fwd %.2f + bwd %.2f + "
      "opt %.2f (+host %.2f) | loss %.4f | %s\n",
      r.model.c_str(), PrecisionLabel(r).c_str(), static_cast<long long>(r.batch),
      static_cast<long long>(r.seq), model::CheckpointingName(r.checkpointing), r.graphs ? 1 : 0,
      b.shares_grads_with_activations() ? "shared" : "own", r.deterministic ? 1 : 0, tok_s, 100 * mfu, gib,
      b.allocated_bytes() / double(1u << 30),
      b.activation_bytes() / double(1u << 30),
      b.state_bytes() / double(1u << 30), step, Median(data_ms), Median(fwd_ms), Median(bwd_ms),
      Median(opt_ms),
      step - Median(data_ms) - Median(fwd_ms) - Median(bwd_ms) - Median(opt_ms), last_loss,
      b.device_name().c_str());
  std::printf("      Megatron FLOPs/iteration (full recompute, for comparison): %.3e; model FLOPs/token %.3e\n",
              cfg.MegatronFlopsPerIteration(r.batch, r.seq), flops_tok);
  const kernels::cuda::Gemm::TuneStats ts = b.gemm_tune_stats();
  std::printf("      gemm autotune: %d shapes tuned, %d changed (%d candidates dropped for other bits); "
              "one call of each: heuristic %.0f us -> chosen %.0f us\n",
              ts.shapes, ts.changed, ts.rejected, ts.heuristic_us, ts.chosen_us);
  if (r.profile) {
    std::printf("      per-op device time per pass (events between ops; %d passes): %s\n",
                b.op_profile().passes(), b.op_profile().Summary().c_str());
    const auto& t = b.op_profile().total_ms();
    const int passes = std::max(1, b.op_profile().passes());
    const double gemm_ms = t[static_cast<int>(cuda::Op::kGemm)] / passes;
    const double cast_ms = t[static_cast<int>(cuda::Op::kFp8Cast)] / passes;
    // Forward, dX and dW of the four block projections: 6 FLOPs per weight per token.
    const int64_t C = cfg.hidden_size, Q = cfg.q_dim(), K = cfg.kv_dim(), F = cfg.intermediate_size;
    const double block_flops = 6.0 * double(n) * double(cfg.num_hidden_layers) *
                               double(C * (Q + 2 * K) + Q * C + 3 * C * F);
    std::printf("      block GEMMs (%s): %.2f ms per pass = %.0f TFLOP/s; FP8 casts (amax, scales, "
                "cast/transpose): %.2f ms per pass\n",
                r.fp8.enabled ? "fp8" : model::PrecisionName(r.precision), gemm_ms,
                gemm_ms > 0 ? block_flops / (gemm_ms * 1e-3) / 1e12 : 0.0, cast_ms);
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path, std::ios::app);
    f << "{\"model\":\"" << r.model << "\",\"precision\":\"" << PrecisionLabel(r)
      << "\",\"batch\":" << r.batch << ",\"seq\":" << r.seq << ",\"checkpointing\":\""
      << model::CheckpointingName(r.checkpointing) << "\",\"graphs\":" << (r.graphs ? 1 : 0)
      << ",\"shared_grads\":" << (b.shares_grads_with_activations() ? 1 : 0)
      << ",\"deterministic\":" << (r.deterministic ? 1 : 0)
      << ",\"tokens_per_s\":" << tok_s << ",\"mfu\":" << mfu << ",\"peak_mem_bytes\":"
      << b.PeakMemoryBytes() << ",\"allocated_bytes\":" << b.allocated_bytes() << ",\"step_ms\":" << step << ",\"data_ms\":" << Median(data_ms)
      << ",\"forward_ms\":" << Median(fwd_ms) << ",\"backward_ms\":" << Median(bwd_ms)
      << ",\"optimizer_ms\":" << Median(opt_ms) << ",\"device\":\"" << b.device_name()
      << "\"}\n";
  }
  return 0;
}

// The flags as given; applied over the defaults and the HT_* variables when
// the benchmark runs (flags win).
struct BenchFlags {
  RunSpec spec;  // the fields without an HT_* variable are bound directly
  std::string precision = "bf16", checkpointing = "none", fp8_recipe, fp8_grad, json;
  int64_t graphs = 0, profile = 0, share_grads = 1, deterministic = 1, fp8_lm_head = -1;
  std::string attention_impl, gemm_autotune;
  int64_t cudnn_bwd_workspace_mb = -1;
  bool explicit_model = false;
};

int RunBench(BenchFlags f) {
  RunSpec& spec = f.spec;
  // Raw getenv: a benchmark binary feeding the config package's HT_* table directly.
  StatusOr<config::CudaConfig> from_env =
      config::CudaConfigFromEnv([](const char* name) -> const char* { return std::getenv(name); });
  if (!from_env.ok()) {
    spdlog::error("bench: {}", from_env.status().ToString());
    return 2;
  }
  spec.kernels = *from_env;
  if (!f.attention_impl.empty()) {
    StatusOr<config::AttentionImpl> impl = config::ParseAttentionImpl(f.attention_impl);
    if (!impl.ok()) {
      spdlog::error("bench: {}", impl.status().ToString());
      return 2;
    }
    spec.kernels.attention_impl = *impl;
  }
  if (!f.gemm_autotune.empty()) spec.kernels.gemm_autotune = f.gemm_autotune;
  if (f.cudnn_bwd_workspace_mb >= 0) spec.kernels.cudnn_bwd_workspace_mb = f.cudnn_bwd_workspace_mb;
  spec.graphs = f.graphs != 0;
  spec.profile = f.profile != 0;
  spec.share_grads = f.share_grads != 0;
  spec.deterministic = f.deterministic != 0;
  if (f.fp8_lm_head >= 0) spec.fp8.lm_head = f.fp8_lm_head != 0;
  if (!f.fp8_recipe.empty()) {
    auto p = model::ParseFp8Recipe(f.fp8_recipe);
    if (!p.ok()) { spdlog::error("bench: --fp8-recipe: {}", p.status().ToString()); return 2; }
    spec.fp8.recipe = *p;
  }
  if (!f.fp8_grad.empty()) {
    auto p = model::ParseFp8Format(f.fp8_grad);
    if (!p.ok()) { spdlog::error("bench: --fp8-grad: {}", p.status().ToString()); return 2; }
    spec.fp8.grad_format = *p;
  }
  if (f.precision == "fp8") {
    spec.precision = model::Precision::kBF16;
    spec.fp8.enabled = true;
  } else {
    auto p = model::ParsePrecision(f.precision);
    if (!p.ok()) { spdlog::error("bench: --precision: {}", p.status().ToString()); return 2; }
    spec.precision = *p;
  }
  auto c = model::ParseCheckpointing(f.checkpointing);
  if (!c.ok()) { spdlog::error("bench: --checkpointing: {}", c.status().ToString()); return 2; }
  spec.checkpointing = *c;
  if (f.explicit_model) return Run(spec, f.json);
  // The two reference runs.
  RunSpec small = spec, large = spec;
  small.model = "125m", small.batch = 16, small.seq = 2048;
  large.model = "1b", large.batch = 4, large.seq = 2048;
  const int rc = Run(small, f.json);
  return Run(large, f.json) | rc;
}

}  // namespace

std::function<int()> AddBenchFlags(CLI::App& app) {
  app.footer(
      "Without --model: the reference runs 125m 16x2048 and 1b 4x2048. The kernel flags default to\n"
      "HT_ATTENTION_IMPL, HT_GEMM_AUTOTUNE and HT_CUDNN_BWD_WORKSPACE_MB (the trainer's cuda.* keys).");
  auto f = std::make_shared<BenchFlags>();
  RunSpec& s = f->spec;
  CLI::Option* model = app.add_option("--model", s.model, "Model shape (125m, 1b, 8b, ...)")->type_name("NAME");
  app.add_option("--batch", s.batch, "Micro-batch")->type_name("B")->check(cli::IntRange(1));
  app.add_option("--seq", s.seq, "Sequence length")->type_name("S")->check(cli::IntRange(1));
  app.add_option("--steps", s.steps, "Timed steps")->type_name("N")->check(cli::IntRange(1));
  app.add_option("--warmup", s.warmup, "Untimed steps first")->type_name("N")->check(cli::IntRange(0));
  app.add_option("--precision", f->precision, "fp8: bf16 with the block GEMMs in FP8")
      ->type_name("")
      ->check(cli::OneOf({"bf16", "fp16", "fp32", "tf32", "fp8"}));
  app.add_option("--checkpointing", f->checkpointing, "Activation checkpointing")
      ->type_name("")
      ->check(cli::OneOf({"none", "selective", "full"}));
  app.add_option("--fp8-recipe", f->fp8_recipe, "FP8 scaling recipe")
      ->type_name("")
      ->check(cli::OneOf({"delayed", "tensorwise"}))
      ->default_str("model.fp8's");
  app.add_option("--fp8-grad", f->fp8_grad, "FP8 format of the gradients")
      ->type_name("")
      ->check(cli::OneOf({"e5m2", "e4m3"}))
      ->default_str("model.fp8's");
  app.add_option("--fp8-lm-head", f->fp8_lm_head, "LM head in FP8 too")
      ->type_name("0|1")
      ->check(cli::IntRange(0))
      ->default_str("model.fp8's");
  app.add_option("--graphs", f->graphs, "CUDA graphs")->type_name("0|1")->check(cli::IntRange(0));
  app.add_option("--profile", f->profile, "Per-op device times (adds events between ops)")
      ->type_name("0|1")
      ->check(cli::IntRange(0));
  app.add_option("--loss-chunk-rows", s.loss_chunk_rows, "Rows per loss chunk (0: the backend's choice)")
      ->type_name("N")
      ->check(cli::IntRange(0));
  app.add_option("--share-grads", f->share_grads, "Block gradients in freed activations")
      ->type_name("0|1")
      ->check(cli::IntRange(0));
  app.add_option("--deterministic", f->deterministic, "0: cuDNN's atomic-dQ attention backward")
      ->type_name("0|1")
      ->check(cli::IntRange(0));
  app.add_option("--attention-impl", f->attention_impl, "Attention kernels (cuda.attention_impl)")
      ->type_name("auto|cudnn|cudnn-fast|cudnn-fwd|tiled|simple")
      ->default_str("$HT_ATTENTION_IMPL, else auto");
  app.add_option("--gemm-autotune", f->gemm_autotune, "GEMM algorithm autotuning (cuda.gemm_autotune)")
      ->type_name("on|off|verbose")
      ->default_str("$HT_GEMM_AUTOTUNE, else on");
  app.add_option("--cudnn-bwd-workspace-mb", f->cudnn_bwd_workspace_mb, "cuDNN attention backward workspace")
      ->type_name("N")
      ->check(cli::IntRange(0))
      ->default_str("$HT_CUDNN_BWD_WORKSPACE_MB");
  app.add_option("--json", f->json, "Append one JSON line per run to FILE")->type_name("FILE");
  return [f, model] {
    f->explicit_model = model->count() > 0;
    return RunBench(*f);
  };
}

}  // namespace hypertrain::bench
