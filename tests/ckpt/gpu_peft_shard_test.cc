// GPU, 2 GPUs: PEFT with the frozen base sharded over the shard group
// (issue 26) on the CUDA backend with NCCL, one forked process per GPU.
// full_shard (activation checkpointing full) trains exactly as the same 2
// ranks with the whole base on each (no_shard): losses bit for bit, the
// checkpoints, the adapter and the merged export the same bytes; LoRA and
// QLoRA (skip with fewer than 2 GPUs). On one GPU: each rank's CUDA backend
// keeps half the base (the storage bytes, NF4 codes and scales included),
// cannot read or run an ungathered unit, and the slices make the base. The parent never touches CUDA (a context does
// not survive fork): every job and backend runs in a child.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backends/cuda/backend.h"
#include "runtime/ckpt/peft_hooks.h"
#include "tests/ckpt/peft_shard_testing.h"

namespace hypertrain::ckpt {
namespace {

using testing::ExpectSameOutputs;
using testing::Parse;
using testing::RunRanks;

int GpuCount() {
  auto codes = parallel::testing::RunProcesses(1, [](int) {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? std::min(n, 100) : 0;
  }, std::chrono::seconds(60));
  return codes[0] < 0 ? 0 : codes[0];
}

#define HT_SKIP_WITHOUT_2_GPUS()                                               \
  do {                                                                         \
    const int gpus = GpuCount();                                               \
    if (gpus < 2) GTEST_SKIP() << "needs 2 CUDA devices, found " << gpus;      \
  } while (0)

std::string TempDir(const std::string& name) { return testing::FreshTempDir("gpu_peft_shard_" + name); }

// tiny with head_dim 64 (the bf16 flash kernels) and 2 layers.
std::vector<std::string> Common(const std::string& exp, const std::string& backend) {
  return {"trainer.backend=" + backend, "trainer.max_steps=6", "trainer.log_every_n_steps=100",
          "model.shape=tiny", "model.num_hidden_layers=2", "model.num_attention_heads=2",
          "model.num_key_value_heads=1", "model.max_context_width=64",
          "model.train_batch_size=2", "model.optim.lr=1e-2",
          "model.data.use_synthetic_data=true", "exp_manager.exp_dir=" + exp,
          "exp_manager.every_n_train_steps=3", "exp_manager.save_top_k=3",
          "distributed.rendezvous_timeout_s=120"};
}

// A trained model as Hugging Face weights (fp32), trained on the CPU.
const std::string& Base() {
  static const std::string dir = [] {
    const std::string exp = TempDir("base");
    auto sets = Common(exp, "cpu");
    sets.push_back("exp_manager.checkpoint.export_hf_dir=" + exp + "/hf");
    sets.push_back("exp_manager.checkpoint.export_hf_dtype=fp32");
    EXPECT_EQ(RunRanks(1, sets).size(), 6u);
    return exp + "/hf";
  }();
  return dir;
}

std::vector<std::string> Peft(const std::string& exp, const std::string& type,
                              const std::string& strategy, std::vector<std::string> extra = {}) {
  auto sets = Common(exp, "cuda");
  for (const std::string& s :
       {std::string("trainer.precision=bf16"), std::string("model.do_finetune=true"),
        "model.hf_model_name_or_path=" + Base(), "model.peft.peft_type=" + type,
        std::string("model.peft.rank=4"), std::string("model.peft.alpha=8"),
        std::string("model.peft.dropout=0.1"), "model.sharding_strategy=" + strategy,
        "exp_manager.checkpoint.export_hf_dir=" + exp + "/merged",
        std::string("exp_manager.checkpoint.export_hf_dtype=fp32")}) {
    sets.push_back(s);
  }
  sets.insert(sets.end(), extra.begin(), extra.end());
  return sets;
}

void ExpectShardedEqualsReplicated(const std::string& type) {
  const std::string whole = TempDir(type + "_whole"), sharded = TempDir(type + "_sharded");
  const std::vector<double> w = RunRanks(2, Peft(whole, type, "no_shard"));
  ASSERT_EQ(w.size(), 6u);
  const std::vector<double> s =
      RunRanks(2, Peft(sharded, type, "full_shard", {"model.activation_checkpointing=full"}));
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s, w);
  ExpectSameOutputs(sharded, whole);
}

TEST(GpuPeftShardTest, LoraShardedBaseEqualsReplicatedBase) {
  HT_SKIP_WITHOUT_2_GPUS();
  ExpectShardedEqualsReplicated("lora");
}

TEST(GpuPeftShardTest, QloraShardedBaseEqualsReplicatedBase) {
  HT_SKIP_WITHOUT_2_GPUS();
  ExpectShardedEqualsReplicated("qlora");
}

// On one GPU: the backend's side of the contract. Each of 2 ranks keeps half
// the base (each unit's storage padded to 2 equal 256-byte-aligned slices),
// cannot read or run a unit that was not gathered, and the two slices copied
// into a slot (what the all-gather does) read back as the whole base, NF4
// codes and scales included.
TEST(GpuPeftShardTest, EachRankKeepsHalfTheBaseAndTheSlicesMakeIt) {
  if (GpuCount() < 1) GTEST_SKIP() << "no CUDA device";
  for (const char* type : {"lora", "qlora"}) {
    const config::TrainConfig c = Parse(Peft(TempDir("bytes"), type, "full_shard"));
    const std::vector<int> codes = parallel::testing::RunProcesses(1, [&](int) {
      model::BackendOptions o;
      o.precision = model::Precision::kBF16;
      o.micro_batch_size = 2;
      o.seq_len = 64;
      o.peft = c.finetune.peft;
      auto whole = cuda::CudaBackend::Create(c.model, o);
      if (!whole.ok() || !LoadFrozenBase(c, **whole).ok()) return 2;
      std::unique_ptr<cuda::CudaBackend> rank[2];
      for (int r = 0; r < 2; ++r) {
        o.base_shard = {r, 2};
        auto b = cuda::CudaBackend::Create(c.model, o);
        if (!b.ok() || !LoadFrozenBase(c, **b).ok()) return 3;
        rank[r] = std::move(*b);
      }
      const model::ParamLayout& base = *rank[1]->BaseLayout();
      int64_t slices = 0;
      for (int u = 0; u < base.num_units(); ++u) {
        if (rank[1]->BaseShardBytes(u) % 256 != 0 || rank[1]->BaseShard(u) == nullptr) return 4;
        slices += rank[1]->BaseShardBytes(u);
      }
      const int64_t all = (*whole)->BaseBytes(), mine = rank[1]->BaseBytes();
      std::fprintf(stderr, "%s: whole base %lld bytes, one of 2 ranks %lld\n", type,
                   static_cast<long long>(all), static_cast<long long>(mine));
      if (mine != slices) return 5;
      // Half, up to the 256-byte alignment of each piece (NF4: 3 per
      // projection, the norms) and of each slice.
      if (2 * mine < all || 2 * mine > all + 2 * 256 * 32 * base.num_units()) return 6;
      std::vector<float> got(16), want;
      if (rank[1]->ReadBase(1, {0, 16}, got.data()).code() != StatusCode::kFailedPrecondition) return 7;
      std::vector<int32_t> tokens(128, 1);
      model::NoOpUnitHooks none;
      if (rank[1]->Loss({tokens.data(), tokens.data(), 2, 64}, none).status().code() !=
          StatusCode::kFailedPrecondition) {
        return 8;
      }
      for (const model::UnitLayout& u : base.units()) {
        const int64_t k = rank[0]->BaseShardBytes(u.index);
        want.assign(u.padded_numel, 0.0f);
        if (!(*whole)->ReadBase(u.index, {0, u.padded_numel}, want.data()).ok()) return 9;
        for (int r = 0; r < 2; ++r) {
          if (!rank[r]->AcquireBase(u.index).ok()) return 10;
          for (int q = 0; q < 2; ++q) {
            if (cudaMemcpy(static_cast<char*>(rank[r]->BaseSlot(u.index)) + q * k,
                           rank[q]->BaseShard(u.index), k, cudaMemcpyDeviceToDevice) != cudaSuccess) {
              return 11;
            }
          }
          if (cudaDeviceSynchronize() != cudaSuccess) return 15;  // the copies, before the backend's stream
          got.assign(u.padded_numel, -1.0f);
          if (!rank[r]->ReadBase(u.index, {0, u.padded_numel}, got.data()).ok()) return 12;
          if (got != want) {
            std::fprintf(stderr, "%s: unit %d gathered on rank %d differs from the whole base\n",
                         type, u.index, r);
            return 13;
          }
          if (!rank[r]->ReleaseBase(u.index).ok() || rank[r]->BaseSlot(u.index) != nullptr) return 14;
        }
      }
      return 0;
    }, std::chrono::seconds(120));
    EXPECT_EQ(codes[0], 0) << type;
  }
}

}  // namespace
}  // namespace hypertrain::ckpt
