#include "runtime/data/loader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <set>

namespace hypertrain::data {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  fs::path p = fs::path(base ? base : "/tmp") / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// Token i of the stream is i % 251, spread over three shards.
std::string MakeStream(const std::string& name, int64_t total, uint32_t vocab = 256) {
  const std::string dir = TempDir(name);
  int64_t i = 0;
  for (int s = 0; s < 3; ++s) {
    std::vector<uint32_t> t;
    for (int64_t n = 0; n < (s < 2 ? total / 3 : total - 2 * (total / 3)); ++n) t.push_back(i++ % 251);
    EXPECT_TRUE(WriteShard(dir + "/part_" + std::to_string(s) + ".bin", t, s == 1 ? 4 : 2, vocab).ok());
  }
  return dir;
}

class CountingAllocator : public HostAllocator {
 public:
  std::atomic<int> live{0};
  void* Allocate(size_t b) override {
    ++live;
    return std::malloc(b);
  }
  void Free(void* p) override {
    --live;
    std::free(p);
  }
};

class CountingStager : public BatchStager {
 public:
  std::atomic<int> staged{0};
  int fail_after = -1;
  Status Stage(Batch& b) override {
    if (staged == fail_after) return Unavailable("injected H2D failure");
    ++staged;
    b.view.staged = &b;
    return Status::Ok();
  }
};

TEST(LoaderTest, BatchesAreTheSampledWindowsAcrossShards) {
  const std::string dir = MakeStream("loader_windows", 1000);
  for (int depth : {1, 4}) {
    CountingAllocator alloc;
    CountingStager stager;
    LoaderOptions o{.train_dir = dir, .vocab_size = 256, .micro_batch = 3, .seq = 16,
                    .grad_accum = 2, .prefetch_depth = depth, .state = {.seed = 3}};
    {
      auto d = DataLoader::Create(o, &alloc, &stager);
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      EXPECT_EQ((*d)->num_tokens(), 1000);
      EXPECT_EQ((*d)->num_samples(), 999 / 16);
      Sampler ref((*d)->num_samples(), 3, 2, 0, 1, {.seed = 3});
      for (int i = 0; i < 30; ++i) {
        auto b = (*d)->Next();
        ASSERT_TRUE(b.ok());
        EXPECT_EQ((*b)->view.staged, *b);
        const auto ids = ref.NextMicroBatch();
        for (int r = 0; r < 3; ++r) {
          for (int t = 0; t < 16; ++t) {
            ASSERT_EQ((*b)->inputs[r * 16 + t], (ids[r] * 16 + t) % 251);
            ASSERT_EQ((*b)->targets[r * 16 + t], (ids[r] * 16 + t + 1) % 251);
          }
        }
        if (i % 2 == 1) {
          EXPECT_EQ((*b)->state_after, ref.state());
        }
        (*d)->Release(*b);
      }
      EXPECT_GE((*d)->TotalWaitSeconds(), 0.0);
    }
    EXPECT_EQ(alloc.live, 0);  // buffers returned
  }
}

TEST(LoaderTest, ResumesFromConsumedState) {
  const std::string dir = MakeStream("loader_resume", 600);
  LoaderOptions o{.train_dir = dir, .vocab_size = 256, .micro_batch = 2, .seq = 8,
                  .grad_accum = 1, .prefetch_depth = 3, .state = {.seed = 9}};
  std::vector<std::vector<int32_t>> want;
  SamplerState at5;
  {
    auto d = std::move(DataLoader::Create(o).value());
    for (int i = 0; i < 12; ++i) {
      Batch* b = *d->Next();
      want.emplace_back(b->inputs, b->inputs + 16);
      d->Release(b);
      if (i == 4) at5 = d->state();
    }
  }
  o.state = at5;
  auto d = std::move(DataLoader::Create(o).value());
  for (int i = 5; i < 12; ++i) {
    Batch* b = *d->Next();
    EXPECT_EQ(std::vector<int32_t>(b->inputs, b->inputs + 16), want[i]) << i;
    d->Release(b);
  }
}

TEST(LoaderTest, ErrorsSurfaceFromNext) {
  const std::string dir = MakeStream("loader_err", 600);
  CountingStager stager;
  stager.fail_after = 2;
  LoaderOptions o{.train_dir = dir, .vocab_size = 256, .micro_batch = 1, .seq = 8};
  auto d = std::move(DataLoader::Create(o, nullptr, &stager).value());
  for (int i = 0; i < 2; ++i) d->Release(*d->Next());
  auto bad = d->Next();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("injected H2D failure"), std::string::npos);
  // Shards made for a larger vocabulary than the model's.
  o.vocab_size = 100;
  EXPECT_NE(DataLoader::Create(o).status().message().find("tokenized for vocab_size 256"),
            std::string::npos);
  // Tokens outside the model's vocabulary in shards that do not say theirs.
  o.train_dir = MakeStream("loader_err_vocab", 600, 0);
  auto small = std::move(DataLoader::Create(o).value());
  auto r = small->Next();
  for (int i = 0; r.ok() && i < 50; ++i) {
    small->Release(*r);
    r = small->Next();
  }
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(">= model.vocab_size 100"), std::string::npos);
  // Config errors.
  o.train_dir = dir + "/missing";
  EXPECT_EQ(DataLoader::Create(o).status().code(), StatusCode::kNotFound);
  o.train_dir = TempDir("loader_empty");
  EXPECT_NE(DataLoader::Create(o).status().message().find("no *.bin token files"), std::string::npos);
  o.prefetch_depth = 0;
  EXPECT_NE(DataLoader::Create(o).status().message().find("prefetch_depth"), std::string::npos);
}

TEST(LoaderTest, SyntheticIsDeterministicAndRankAware) {
  LoaderOptions o{.synthetic = true, .vocab_size = 50, .micro_batch = 2, .seq = 8,
                  .grad_accum = 1, .rank = 0, .dp_world = 2, .state = {.seed = 4}};
  auto a = std::move(DataLoader::Create(o).value());
  auto b = std::move(DataLoader::Create(o).value());
  o.rank = 1;
  auto c = std::move(DataLoader::Create(o).value());
  Batch* x = *a->Next();
  Batch* y = *b->Next();
  Batch* z = *c->Next();
  EXPECT_EQ(std::vector<int32_t>(x->inputs, x->inputs + 16), std::vector<int32_t>(y->inputs, y->inputs + 16));
  EXPECT_NE(std::vector<int32_t>(x->inputs, x->inputs + 16), std::vector<int32_t>(z->inputs, z->inputs + 16));
  for (int i = 0; i < 16; ++i) {
    EXPECT_LT(x->inputs[i], 50);
    if (i % 8 < 7) {
      EXPECT_EQ(x->targets[i], x->inputs[i + 1]);
    }
  }
}

}  // namespace
}  // namespace hypertrain::data
