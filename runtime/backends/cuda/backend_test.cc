// CudaBackend vs the CPU reference backend on a small Llama, plus the
// properties a training run relies on: checkpointing modes agree bit for bit,
// same seed -> same losses, staged batches and CUDA graphs change nothing,
// fp16 overflow is caught by the grad norm so the loss scaler skips the step.
// GPU tests skip on machines without one; the argument checks run anywhere.
#include "runtime/backends/cuda/backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/backends/cpu/backend.h"
#include "runtime/config/config.h"
#include "runtime/testing/cuda_device.h"
#include "runtime/train/loss_scaler.h"

namespace hypertrain::cuda {
namespace {

using model::ActivationCheckpointing;
using model::Precision;

model::ModelConfig SmallConfig() {
  model::ModelConfig c;
  c.vocab_size = 300;
  c.hidden_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;  // head_dim 64
  c.num_key_value_heads = 1;
  c.intermediate_size = 352;
  c.max_context_width = 96;
  c.rope_theta = 500000.0;
  c.rope_scaling.type = model::RopeScalingType::kLlama3;
  c.rope_scaling.factor = 32;
  c.rope_scaling.original_max_position_embeddings = 32;
  c.tie_word_embeddings = true;
  return c;
}

model::BackendOptions Options(Precision p, ActivationCheckpointing ck = ActivationCheckpointing::kNone) {
  model::BackendOptions o;
  o.precision = p;
  o.checkpointing = ck;
  o.micro_batch_size = 2;
  o.seq_len = 96;
  o.seed = 77;
  return o;
}

struct Tokens {
  std::vector<int32_t> inputs, targets;
  model::TokenBatch view(int64_t b, int64_t s) const {
    return {inputs.data(), targets.data(), b, s, nullptr};
  }
};

Tokens RandomTokens(int64_t n, int64_t vocab, uint32_t seed, bool with_ignored = true) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(vocab - 1));
  Tokens t;
  for (int64_t i = 0; i < n; ++i) {
    t.inputs.push_back(d(rng));
    const int32_t target = d(rng);
    t.targets.push_back(with_ignored && i % 13 == 4 ? -100 : target);
  }
  return t;
}

std::vector<float> Read(model::Backend& b, int u, model::StateKind k) {
  std::vector<float> v(b.Owned(u).size());
  const Status st = b.ReadState(u, k, v.data());
  EXPECT_TRUE(st.ok()) << st.ToString();
  return v;
}

// One optimizer step the way runtime/train drives it; returns the loss.
double TrainStep(model::Backend& b, const model::TokenBatch& batch, int step) {
  model::NoOpUnitHooks hooks;
  EXPECT_TRUE(b.ZeroGrads().ok());
  auto loss = b.ForwardBackward(batch, 1.0f, hooks);
  EXPECT_TRUE(loss.ok()) << loss.status().ToString();
  double sumsq = 0;
  for (int u = 0; u < b.layout().num_units(); ++u) sumsq += *b.GradSumSquares(u);
  kernels::AdamWParams p;
  p.lr = 1e-3f;
  p.weight_decay = 0.1f;
  p.step = step;
  p.grad_scale = static_cast<float>(std::min(1.0, 1.0 / (std::sqrt(sumsq) + 1e-6)));
  for (int u = 0; u < b.layout().num_units(); ++u) EXPECT_TRUE(b.OptimizerStep(u, p).ok());
  return loss.ok() ? *loss : NAN;
}

TEST(CudaBackendArgs, RejectsUnsupportedHeadDims) {
  model::ModelConfig c = SmallConfig();
  c.num_attention_heads = 4;  // head_dim 32: fp32 path only
  c.num_key_value_heads = 2;
  auto r = CudaBackend::Create(c, Options(Precision::kBF16));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("head_dim 32"), std::string::npos) << r.status().ToString();
  c.hidden_size = 96;  // head_dim 24
  c.num_attention_heads = 4;
  r = CudaBackend::Create(c, Options(Precision::kFP32));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("head_dim 24"), std::string::npos) << r.status().ToString();
}

// CPU-runnable: every value the config accepts for the kernel keys reaches
// the kernels as the matching option (one attention enum, no name round-trip).
TEST(CudaBackendArgs, KernelOptionsFromEveryConfigValue) {
  static_assert(std::is_same_v<config::AttentionImpl, kernels::cuda::AttentionImpl>);
  const config::CudaConfig defaults;
  CudaOptions o;
  ASSERT_TRUE(SetKernelOptions(defaults.attention_impl, defaults.gemm_autotune,
                               defaults.cudnn_bwd_workspace_mb, &o).ok());
  EXPECT_EQ(o.attention_impl, kernels::cuda::AttentionImpl::kAuto);
  EXPECT_EQ(o.gemm_autotune, kernels::cuda::GemmAutotune::kOn);
  EXPECT_EQ(o.cudnn_bwd_workspace_cap_bytes, kernels::cuda::kDefaultCudnnBackwardWorkspaceCapBytes);
  for (const std::string& name : config::AttentionImplNames()) {
    StatusOr<config::AttentionImpl> impl = config::ParseAttentionImpl(name);
    ASSERT_TRUE(impl.ok()) << name;
    ASSERT_TRUE(SetKernelOptions(*impl, "on", 1, &o).ok()) << name;
    EXPECT_EQ(o.attention_impl, *impl) << name;
    EXPECT_EQ(kernels::cuda::AttentionImplName(o.attention_impl), name);
  }
  for (const std::string& tune : config::GemmAutotuneNames()) {
    ASSERT_TRUE(SetKernelOptions(kernels::AttentionImpl::kAuto, tune, 1, &o).ok()) << tune;
    EXPECT_EQ(kernels::cuda::GemmAutotuneName(o.gemm_autotune), tune);
  }
  EXPECT_EQ(o.cudnn_bwd_workspace_cap_bytes, size_t{1} << 20);
  const Status bad = SetKernelOptions(kernels::AttentionImpl::kAuto, "maybe", 1, &o);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("cuda.gemm_autotune"), std::string::npos) << bad.ToString();
  EXPECT_FALSE(SetKernelOptions(kernels::AttentionImpl::kAuto, "on", 0, &o).ok());
}

// CPU-runnable: the ranges a first-write pass must zero are exactly the
// complement of the GEMM-written tensors (everything but the norms and, untied,
// embed_tokens), padding included, merged and in order.
TEST(CudaBackendArgs, UnwrittenGradRangesAreTheComplementOfGemmWrites) {
  for (bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    model::ModelConfig c = SmallConfig();
    c.tie_word_embeddings = tied;
    model::LayoutOptions lo;
    lo.tensor_alignment = 96;  // gaps between tensors
    lo.pad_multiple = 1000;    // and padding at each unit's end
    auto layout = model::ParamLayout::Build(c, lo);
    ASSERT_TRUE(layout.ok()) << layout.status().ToString();
    const auto ranges = UnwrittenGradRanges(*layout);
    for (int u = 0; u < layout->num_units(); ++u) {
      const model::UnitLayout& unit = layout->unit(u);
      std::vector<char> want(unit.padded_numel, 1);  // 1: must be zeroed
      for (const model::TensorSlot& t : unit.tensors) {
        const bool norm = t.kind == model::TensorKind::kNorm;
        const bool lookup_only = t.kind == model::TensorKind::kEmbedding && !tied;
        for (int64_t i = t.offset; i < t.offset + t.numel; ++i) want[i] = norm || lookup_only;
      }
      std::vector<char> got(unit.padded_numel, 0);
      int64_t last_end = -1;
      for (const auto& [ru, r] : ranges) {
        if (ru != u) continue;
        EXPECT_GT(r.begin, last_end) << "unit " << u << ": ranges overlap, touch or are out of order";
        last_end = r.end;
        for (int64_t i = r.begin; i < r.end; ++i) got[i] = 1;
      }
      EXPECT_EQ(got, want) << "unit " << u;
    }
  }
}

class CudaVsCpu : public ::testing::TestWithParam<std::tuple<Precision, int64_t>> {};

TEST_P(CudaVsCpu, LossAndGradientsMatchCpuBackend) {
  HT_SKIP_WITHOUT_GPU();
  const auto [precision, alignment] = GetParam();
  model::BackendOptions o = Options(precision);
  o.layout.tensor_alignment = alignment;  // 1000: gaps, so q/k/v and gate/up GEMMs run unfused
  auto gpu = CudaBackend::Create(SmallConfig(), o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  auto cpu = cpu::CpuBackend::Create(SmallConfig(), o);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  const Tokens t = RandomTokens(2 * 96, 300, 5);
  model::NoOpUnitHooks hooks;
  ASSERT_TRUE((*gpu)->ZeroGrads().ok());
  ASSERT_TRUE((*cpu)->ZeroGrads().ok());
  auto gl = (*gpu)->ForwardBackward(t.view(2, 96), 2.0f, hooks);
  ASSERT_TRUE(gl.ok()) << gl.status().ToString();
  auto cl = (*cpu)->ForwardBackward(t.view(2, 96), 2.0f, hooks);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  const double loss_tol = precision == Precision::kBF16   ? 2e-2
                          : precision == Precision::kFP16 ? 1e-2
                          : precision == Precision::kTF32 ? 2e-3
                                                          : 1e-5;
  EXPECT_NEAR(*gl, *cl, loss_tol * *cl) << "loss";
  EXPECT_GT(*cl, 4.0);  // ~ln(300) at init: the model is not trivially solved

  // bf16 carries 8 bits of mantissa through ~20 ops: a few percent per
  // tensor; norm-weight gradients are sums with cancellation, so looser.
  const double linear_tol = precision == Precision::kBF16   ? 5e-2
                            : precision == Precision::kFP16 ? 2e-2
                            : precision == Precision::kTF32 ? 1e-2
                                                            : 1e-4;
  const auto& layout = (*gpu)->layout();
  for (int u = 0; u < layout.num_units(); ++u) {
    const auto g = Read(**gpu, u, model::StateKind::kShardGrads);
    const auto c = Read(**cpu, u, model::StateKind::kShardGrads);
    for (const auto& slot : layout.unit(u).tensors) {
      double num = 0, den = 0, worst = 0;
      int64_t worst_i = slot.offset;
      for (int64_t i = slot.offset; i < slot.offset + slot.numel; ++i) {
        ASSERT_TRUE(std::isfinite(g[i])) << slot.name << " element " << i - slot.offset;
        const double d = double(g[i]) - c[i];
        num += d * d;
        den += double(c[i]) * c[i];
        if (std::abs(d) > worst) worst = std::abs(d), worst_i = i;
      }
      const double rel = std::sqrt(num / std::max(den, 1e-30));
      const double tol = slot.kind == model::TensorKind::kNorm ? 2 * linear_tol : linear_tol;
      EXPECT_LE(rel, tol) << slot.name << ": relative L2 " << rel << "; worst at "
                          << worst_i - slot.offset << " gpu " << g[worst_i] << " cpu "
                          << c[worst_i];
      EXPECT_GT(den, 0.0) << slot.name << " has an all-zero reference gradient";
    }
  }
  // Forward-only loss agrees with the training loss on the same weights.
  auto fl = (*gpu)->Loss(t.view(2, 96), hooks);
  ASSERT_TRUE(fl.ok()) << fl.status().ToString();
  EXPECT_DOUBLE_EQ(*fl, *gl);
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaVsCpu,
                         ::testing::Combine(::testing::Values(Precision::kBF16, Precision::kFP16,
                                                              Precision::kFP32, Precision::kTF32),
                                            ::testing::Values(int64_t{64}, int64_t{1000})));

TEST(CudaBackend, CheckpointingModesGiveIdenticalGradients) {
  HT_SKIP_WITHOUT_GPU();
  const Tokens t = RandomTokens(2 * 96, 300, 9);
  std::vector<std::vector<float>> ref;
  for (auto ck : {ActivationCheckpointing::kNone, ActivationCheckpointing::kSelective,
                  ActivationCheckpointing::kFull}) {
    auto b = CudaBackend::Create(SmallConfig(), Options(Precision::kBF16, ck));
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    model::NoOpUnitHooks hooks;
    ASSERT_TRUE((*b)->ZeroGrads().ok());
    ASSERT_TRUE((*b)->ForwardBackward(t.view(2, 96), 1.0f, hooks).ok());
    std::vector<std::vector<float>> grads;
    for (int u = 0; u < (*b)->layout().num_units(); ++u)
      grads.push_back(Read(**b, u, model::StateKind::kShardGrads));
    if (ref.empty()) {
      ref = grads;
    } else {
      for (size_t u = 0; u < grads.size(); ++u)
        EXPECT_EQ(grads[u], ref[u]) << model::CheckpointingName(ck) << " unit " << u;
    }
    if (ck == ActivationCheckpointing::kFull) {
      EXPECT_GT((*b)->activation_bytes(), 0);
    }
  }
}

TEST(CudaBackend, SameSeedSameLossesWithStagingAndGraphs) {
  HT_SKIP_WITHOUT_GPU();
  std::vector<Tokens> batches;
  for (uint32_t i = 0; i < 3; ++i) batches.push_back(RandomTokens(2 * 96, 300, 100 + i));
  auto run = [&](bool graphs, bool staged) {
    CudaOptions co;
    co.cuda_graphs = graphs;
    auto b = CudaBackend::Create(SmallConfig(), Options(Precision::kBF16), co);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    std::vector<double> losses;
    for (int step = 1; step <= 3; ++step) {
      const Tokens& t = batches[step - 1];
      data::Batch batch;
      batch.view = t.view(2, 96);
      if (staged) {
        // Pinned copies staged through the H2D stream, as the loader does.
        auto* alloc = (*b)->host_allocator();
        batch.inputs = static_cast<int32_t*>(alloc->Allocate(t.inputs.size() * 4));
        batch.targets = static_cast<int32_t*>(alloc->Allocate(t.targets.size() * 4));
        std::copy(t.inputs.begin(), t.inputs.end(), batch.inputs);
        std::copy(t.targets.begin(), t.targets.end(), batch.targets);
        batch.view.inputs = batch.inputs;
        batch.view.targets = batch.targets;
        const Status st = (*b)->stager()->Stage(batch);
        EXPECT_TRUE(st.ok()) << st.ToString();
      }
      losses.push_back(TrainStep(**b, batch.view, step));
      if (staged) {
        EXPECT_TRUE((*b)->Synchronize().ok());
        (*b)->host_allocator()->Free(batch.inputs);
        (*b)->host_allocator()->Free(batch.targets);
      }
    }
    return losses;
  };
  const auto base = run(false, false);
  EXPECT_EQ(base, run(false, false)) << "same seed, same data: losses must be bit-identical";
  EXPECT_EQ(base, run(false, true)) << "staged batches";
  EXPECT_EQ(base, run(true, false)) << "CUDA graph replay";
  EXPECT_LT(base[2], base[0] + 0.5);  // training runs (and does not blow up)
}

// deterministic = false swaps only the attention backward (cuDNN's atomic dQ):
// the forward is the same kernel, so the first loss is bit-identical, and the
// gradients agree to bf16 rounding.
TEST(CudaBackend, NonDeterministicModeTrainsLikeTheDeterministicOne) {
  HT_SKIP_WITHOUT_GPU();
  const Tokens t = RandomTokens(2 * 96, 300, 41);
  model::BackendOptions fast_options = Options(Precision::kBF16);
  fast_options.deterministic = false;
  auto det = CudaBackend::Create(SmallConfig(), Options(Precision::kBF16));
  auto fast = CudaBackend::Create(SmallConfig(), fast_options);
  ASSERT_TRUE(det.ok()) << det.status().ToString();
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  model::NoOpUnitHooks hooks;
  for (auto* b : {det->get(), fast->get()}) ASSERT_TRUE(b->ZeroGrads().ok());
  auto det_loss = (*det)->ForwardBackward(t.view(2, 96), 1.0f, hooks);
  auto fast_loss = (*fast)->ForwardBackward(t.view(2, 96), 1.0f, hooks);
  ASSERT_TRUE(det_loss.ok() && fast_loss.ok());
  EXPECT_EQ(*det_loss, *fast_loss) << "the forward does not depend on the mode";
  for (int u = 0; u < (*det)->layout().num_units(); ++u) {
    const std::vector<float> a = Read(**det, u, model::StateKind::kShardGrads);
    const std::vector<float> b = Read(**fast, u, model::StateKind::kShardGrads);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
      norm += double(a[i]) * a[i];
    }
    EXPECT_GT(norm, 0.0) << "unit " << u;
    EXPECT_LT(std::sqrt(diff / norm), 2e-2) << "unit " << u << ": relative L2 difference";
  }
  for (int step = 2; step <= 3; ++step) {
    const Tokens next = RandomTokens(2 * 96, 300, 41 + step);
    const double a = TrainStep(**det, next.view(2, 96), step);
    const double b = TrainStep(**fast, next.view(2, 96), step);
    EXPECT_NEAR(a, b, 1e-2 * std::fabs(a)) << "step " << step;
  }
}

TEST(CudaBackend, Fp16OverflowIsDetectedAndTheScalerSkipsTheStep) {
  HT_SKIP_WITHOUT_GPU();
  auto b = CudaBackend::Create(SmallConfig(), Options(Precision::kFP16));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  train::LossScalerOptions so;
  so.enabled = true;
  so.initial_scale = 65536.0;
  train::LossScaler scaler(so);
  const Tokens t = RandomTokens(2 * 96, 300, 3);
  model::NoOpUnitHooks hooks;
  const auto before = Read(**b, 1, model::StateKind::kMasterParams);
  // A loss scale far past fp16's range: the logit gradients overflow.
  ASSERT_TRUE((*b)->ZeroGrads().ok());
  ASSERT_TRUE((*b)->ForwardBackward(t.view(2, 96), 1e30f, hooks).ok());
  double sumsq = 0;
  for (int u = 0; u < (*b)->layout().num_units(); ++u) sumsq += *(*b)->GradSumSquares(u);
  EXPECT_FALSE(std::isfinite(sumsq));
  EXPECT_FALSE(scaler.Update(std::isfinite(sumsq)));  // skip
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_EQ(before, Read(**b, 1, model::StateKind::kMasterParams));  // nothing applied
  // With the (backed-off) scale the gradients are finite again.
  ASSERT_TRUE((*b)->ZeroGrads().ok());
  ASSERT_TRUE((*b)->ForwardBackward(t.view(2, 96), static_cast<float>(scaler.scale()), hooks).ok());
  sumsq = 0;
  for (int u = 0; u < (*b)->layout().num_units(); ++u) sumsq += *(*b)->GradSumSquares(u);
  EXPECT_TRUE(std::isfinite(sumsq));
  EXPECT_GT(sumsq, 0.0);
  EXPECT_TRUE(scaler.Update(true));
}

// k micro-batches of b (each weighted 1/k) give the gradient of one batch of
// k*b (no ignored targets, so every micro-batch mean has the same count).
TEST(CudaBackend, GradientAccumulationMatchesOneLargeBatch) {
  HT_SKIP_WITHOUT_GPU();
  const Tokens t = RandomTokens(4 * 96, 300, 55, /*with_ignored=*/false);
  model::BackendOptions small = Options(Precision::kFP32), large = small;
  large.micro_batch_size = 4;
  auto a = CudaBackend::Create(SmallConfig(), small);
  auto b = CudaBackend::Create(SmallConfig(), large);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  model::NoOpUnitHooks hooks;
  ASSERT_TRUE((*a)->ZeroGrads().ok());
  for (int m = 0; m < 2; ++m) {
    const model::TokenBatch mb{t.inputs.data() + m * 2 * 96, t.targets.data() + m * 2 * 96, 2, 96,
                               nullptr};
    ASSERT_TRUE((*a)->ForwardBackward(mb, 0.5f, hooks).ok());
  }
  ASSERT_TRUE((*b)->ZeroGrads().ok());
  ASSERT_TRUE((*b)->ForwardBackward(t.view(4, 96), 1.0f, hooks).ok());
  for (int u = 0; u < (*a)->layout().num_units(); ++u) {
    const auto ga = Read(**a, u, model::StateKind::kShardGrads);
    const auto gb = Read(**b, u, model::StateKind::kShardGrads);
    double num = 0, den = 0;
    for (size_t i = 0; i < ga.size(); ++i) {
      num += (double(ga[i]) - gb[i]) * (double(ga[i]) - gb[i]);
      den += double(gb[i]) * gb[i];
    }
    EXPECT_LE(std::sqrt(num / den), 1e-5) << "unit " << u;
  }
}

// ZeroGrads is lazy without a unit pool: the next pass writes the GEMM-made
// weight gradients and zeroes the rest (norms, padding). Gradients poisoned
// before ZeroGrads must leave no trace, the lazy pass must match eager zeroing
// (CUDA graphs keep the memset), and a read before any pass sees zeros.
TEST(CudaBackend, LazyZeroGradsLeavesNoTrace) {
  HT_SKIP_WITHOUT_GPU();
  const Tokens t = RandomTokens(2 * 96, 300, 77);
  model::NoOpUnitHooks hooks;
  auto grads_after_pass = [&](bool poison, bool graphs) {
    CudaOptions co;
    co.cuda_graphs = graphs;  // first call runs eagerly; graphs only switch zeroing to eager
    auto b = CudaBackend::Create(SmallConfig(), Options(Precision::kFP32), co);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    std::vector<std::vector<float>> out;
    if (!b.ok()) return out;
    if (poison) {
      std::mt19937 rng(5);
      std::normal_distribution<float> d(0.0f, 3.0f);
      for (int u = 0; u < (*b)->layout().num_units(); ++u) {
        std::vector<float> junk((*b)->Owned(u).size());
        for (float& x : junk) x = d(rng);
        EXPECT_TRUE((*b)->WriteState(u, model::StateKind::kShardGrads, junk.data()).ok());
      }
      EXPECT_TRUE((*b)->ZeroGrads().ok());
      for (int u = 0; u < (*b)->layout().num_units(); ++u) {
        for (float x : Read(**b, u, model::StateKind::kShardGrads)) {
          if (x != 0.0f) {
            ADD_FAILURE() << "unit " << u << ": a read after ZeroGrads saw " << x;
            break;
          }
        }
      }
      // Poison again, then the pass itself must overwrite everything.
      for (int u = 0; u < (*b)->layout().num_units(); ++u) {
        std::vector<float> junk((*b)->Owned(u).size(), 1e30f);
        EXPECT_TRUE((*b)->WriteState(u, model::StateKind::kShardGrads, junk.data()).ok());
      }
    }
    EXPECT_TRUE((*b)->ZeroGrads().ok());
    EXPECT_TRUE((*b)->ForwardBackward(t.view(2, 96), 1.0f, hooks).ok());
    for (int u = 0; u < (*b)->layout().num_units(); ++u) {
      out.push_back(Read(**b, u, model::StateKind::kShardGrads));
    }
    return out;
  };
  const auto fresh = grads_after_pass(false, false);
  EXPECT_EQ(grads_after_pass(true, false), fresh) << "poisoned gradients leaked through the lazy zeroing";
  const auto eager = grads_after_pass(true, true);
  ASSERT_EQ(eager.size(), fresh.size());
  for (size_t u = 0; u < fresh.size(); ++u) {
    double num = 0, den = 0;
    for (size_t i = 0; i < fresh[u].size(); ++i) {
      num += (double(fresh[u][i]) - eager[u][i]) * (double(fresh[u][i]) - eager[u][i]);
      den += double(eager[u][i]) * eager[u][i];
    }
    EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), 1e-6) << "unit " << u << ": lazy vs eager zeroing";
  }
}

TEST(CudaBackend, RejectsWrongBatchAndOutOfRangeTokens) {
  HT_SKIP_WITHOUT_GPU();
  auto b = CudaBackend::Create(SmallConfig(), Options(Precision::kBF16));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  model::NoOpUnitHooks hooks;
  Tokens t = RandomTokens(2 * 96, 300, 1);
  auto r = (*b)->ForwardBackward(t.view(1, 96), 1.0f, hooks);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  t.inputs[17] = 300;
  r = (*b)->ForwardBackward(t.view(2, 96), 1.0f, hooks);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("position 17"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace hypertrain::cuda
