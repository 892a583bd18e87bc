#include "runtime/ckpt/manager.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "core/atomic_file.h"
#include "core/testing/log_capture.h"
#include "runtime/ckpt/test_util.h"

namespace hypertrain::ckpt {
namespace {

namespace fs = std::filesystem;
using testing::Expected;
using testing::MakeLayout;

// In-memory state of one rank: its owned range of every unit.
class FakeState : public StateAccess {
 public:
  FakeState(const ModelLayoutDesc& d, int shard, int shards, int64_t salt) {
    for (const UnitEntry& u : d.units) {
      const ElemRange r = EvenShard(u.padded_numel, shard, shards);
      owned.push_back(r);
      std::array<std::vector<float>, kNumStates> a;
      for (int s = 0; s < kNumStates; ++s) a[s] = salt < 0 ? std::vector<float>(r.size(), 0.0f) : Expected(d, u.index, r, s, salt);
      values.push_back(a);
    }
  }
  ElemRange Owned(int unit) const override { return owned[unit]; }
  Status Read(int unit, int state, float* host) override {
    std::copy(values[unit][state].begin(), values[unit][state].end(), host);
    return Status::Ok();
  }
  Status Write(int unit, int state, const float* host) override {
    std::copy(host, host + owned[unit].size(), values[unit][state].begin());
    return Status::Ok();
  }
  std::vector<ElemRange> owned;
  std::vector<std::array<std::vector<float>, kNumStates>> values;
};

class ManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/mgr_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    opts_.dir = root_;
    opts_.every_n_train_steps = 2;
    opts_.save_top_k = 2;
    opts_.coordinator_timeout_s = 5;
  }
  void TearDown() override { SetWriteFailureBudget(-1); }
  SaveRequest Request(int64_t step) {
    SaveRequest r;
    r.step = step;
    r.tokens_seen = step * 64;
    r.config_hash = "abc";
    r.trainer_state = {{"loss_scale", 1024.0}};
    r.sampler = {{"position", step * 8}};
    r.rng = {{"state", "x"}};
    return r;
  }
  std::string root_;
  hypertrain::testing::LogCapture logs_;
  CheckpointOptions opts_;
  ModelLayoutDesc layout_ = MakeLayout(3, 4, 4);
};

TEST_F(ManagerTest, AsyncSavesRetentionAndAutomaticResume) {
  {
    CheckpointManager mgr(opts_, {}, layout_);
    auto start = mgr.Start();
    ASSERT_TRUE(start.ok());
    EXPECT_FALSE(start->has_value());
    for (int64_t step = 1; step <= 7; ++step) {
      FakeState st(layout_, 0, 1, step);
      auto due = mgr.ShouldSave(step);
      ASSERT_TRUE(due.ok());
      EXPECT_EQ(*due, step % 2 == 0);
      if (*due) {
        ASSERT_TRUE(mgr.Save(Request(step), st).ok());
      }
    }
    ASSERT_TRUE(mgr.Finish().ok());
    EXPECT_EQ(mgr.stats().saves_ok, 3);
    EXPECT_EQ(mgr.stats().last_committed_step, 6);
  }
  auto all = ListCheckpoints(root_);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 4);
  EXPECT_EQ(all[1].first, 6);
  EXPECT_NE(logs_.text().find("training stall"), std::string::npos);
  EXPECT_NE(logs_.text().find("MB/s"), std::string::npos);

  CheckpointManager again(opts_, {}, layout_);
  auto found = again.Start();
  ASSERT_TRUE(found.ok());
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->manifest.step, 6);
  EXPECT_EQ((*found)->manifest.ranks[0].sampler["position"], 48);
  EXPECT_EQ((*found)->manifest.trainer_state["loss_scale"], 1024.0);
  FakeState restored(layout_, 0, 1, -1);
  ASSERT_TRUE(again.Load(**found, restored, "abc").ok());
  FakeState want(layout_, 0, 1, 6);
  EXPECT_EQ(restored.values, want.values);
  // The step just resumed from is not saved again.
  EXPECT_FALSE(*again.ShouldSave(6));
}

// Records where and how it allocates; fails from the `fail_at`-th call on.
class RecordingAllocator : public HostAllocator {
 public:
  const char* name() const override { return "recording"; }
  StatusOr<void*> Allocate(size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu);
    threads.push_back(std::this_thread::get_id());
    bound_on_allocation.push_back(bound_thread == std::this_thread::get_id());
    if (++calls >= fail_at) return IoError("no memory for " + std::to_string(bytes) + " bytes");
    return PageableHostAllocator()->Allocate(bytes);
  }
  void Free(void* p) override { PageableHostAllocator()->Free(p); }
  std::function<void()> BindThread() const override {
    return [this] { const_cast<RecordingAllocator*>(this)->bound_thread = std::this_thread::get_id(); };
  }
  std::mutex mu;
  int calls = 0;
  int fail_at = 1 << 30;
  std::thread::id bound_thread;
  std::vector<std::thread::id> threads;
  std::vector<bool> bound_on_allocation;
};

// Pinned snapshot memory takes seconds per 10 GB: it is allocated on a thread
// of its own (bound by the allocator first), never on the caller's; the first
// save uses those buffers, and an allocation failure is that save's error.
TEST_F(ManagerTest, SnapshotBuffersAreAllocatedInTheBackground) {
  RecordingAllocator alloc;
  {
    CheckpointManager mgr(opts_, {}, layout_, &alloc);
    ASSERT_TRUE(mgr.Start().ok());
    FakeState st(layout_, 0, 1, 2);
    ASSERT_TRUE(mgr.PrepareSnapshot(st).ok());
    ASSERT_TRUE(mgr.AwaitPreparedSnapshot().ok());
    ASSERT_EQ(alloc.threads.size(), layout_.units.size());
    for (size_t i = 0; i < alloc.threads.size(); ++i) {
      EXPECT_NE(alloc.threads[i], std::this_thread::get_id());
      EXPECT_TRUE(alloc.bound_on_allocation[i]) << "allocation " << i << " before BindThread ran";
    }
    ASSERT_TRUE(mgr.Save(Request(2), st).ok());
    ASSERT_TRUE(mgr.Finish().ok());
    EXPECT_EQ(alloc.threads.size(), layout_.units.size()) << "the save allocated again";
  }
  FakeState restored(layout_, 0, 1, -1);
  CheckpointManager again(opts_, {}, layout_);
  auto found = again.Start();
  ASSERT_TRUE(found.ok() && found->has_value());
  ASSERT_TRUE(again.Load(**found, restored, "abc").ok());
  EXPECT_EQ(restored.values, FakeState(layout_, 0, 1, 2).values);

  RecordingAllocator failing;
  failing.fail_at = 2;
  opts_.dir = root_ + "/failing";
  CheckpointManager mgr(opts_, {}, layout_, &failing);
  ASSERT_TRUE(mgr.Start().ok());
  FakeState st(layout_, 0, 1, 4);
  ASSERT_TRUE(mgr.PrepareSnapshot(st).ok());  // returns before allocating
  const Status saved = mgr.Save(Request(4), st);
  EXPECT_FALSE(saved.ok());
  EXPECT_NE(saved.message().find("no memory for"), std::string::npos) << saved.ToString();
  EXPECT_TRUE(ListCheckpoints(opts_.dir).empty());
}

RankPlacement ShardRank(int rank, int shards) {
  RankPlacement p;
  p.rank = rank;
  p.world.world_size = shards;
  p.world.shard_degree = shards;
  p.shard_rank = rank;
  return p;
}

// Each rank of several checks the crc32c of only the shard files it reads
// (not all world-size files at Start): a corrupt file of rank 1's fails rank
// 1's load retryably and moves the checkpoint aside (kept), so the gang's
// restart resumes from the one before it on every rank; rank 0 never read it.
TEST_F(ManagerTest, EachRankVerifiesTheFilesItReads) {
  for (int64_t step : {2, 4}) {
    std::vector<std::unique_ptr<CheckpointManager>> ranks;
    std::vector<std::thread> savers;
    for (int r = 0; r < 2; ++r) {
      ranks.push_back(std::make_unique<CheckpointManager>(opts_, ShardRank(r, 2), layout_));
      ASSERT_TRUE(ranks.back()->Start().ok());
    }
    for (int r = 0; r < 2; ++r) {
      savers.emplace_back([&, r] {
        FakeState st(layout_, r, 2, step);
        EXPECT_TRUE(ranks[r]->Save(Request(step), st).ok());
        EXPECT_TRUE(ranks[r]->Finish().ok());
      });
    }
    for (std::thread& t : savers) t.join();
  }
  const std::string step4 = root_ + "/step-4";
  auto m = VerifyCheckpoint(step4, true);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->files.size(), 2u);
  const ShardFileRecord& file1 = m->files[0].shard_rank == 1 ? m->files[0] : m->files[1];
  {  // one flipped byte in the middle of rank 1's shard file
    const std::string path = step4 + "/" + file1.name;
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(file1.bytes / 2);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x5a;
    f.seekp(file1.bytes / 2);
    f.write(&c, 1);
  }
  CheckpointManager rank0(opts_, ShardRank(0, 2), layout_);
  auto found0 = rank0.Start();  // structure only: both ranks pick step 4
  ASSERT_TRUE(found0.ok() && found0->has_value());
  EXPECT_EQ((*found0)->manifest.step, 4);
  CheckpointManager rank1(opts_, ShardRank(1, 2), layout_);
  auto found1 = rank1.Start();
  ASSERT_TRUE(found1.ok() && found1->has_value());
  EXPECT_EQ((*found1)->manifest.step, 4);
  FakeState st0(layout_, 0, 2, -1);
  ASSERT_TRUE(rank0.Load(**found0, st0).ok());
  EXPECT_EQ(st0.values, FakeState(layout_, 0, 2, 4).values);
  EXPECT_NE(logs_.text().find("rank 0: crc32c of the shard files it reads"), std::string::npos) << logs_.text();
  FakeState st1(layout_, 1, 2, -1);
  const Status failed = rank1.Load(**found1, st1);
  EXPECT_EQ(failed.code(), StatusCode::kUnavailable) << failed.ToString();  // exit 200: the gang restarts
  EXPECT_NE(failed.message().find(file1.name + ": crc32c"), std::string::npos) << failed.ToString();
  EXPECT_NE(failed.message().find("moved aside to " + step4 + ".corrupt-"), std::string::npos) << failed.ToString();
  EXPECT_FALSE(fs::exists(step4));
  // The restart: every rank resumes from step 2, exactly.
  for (int r = 0; r < 2; ++r) {
    CheckpointManager again(opts_, ShardRank(r, 2), layout_);
    auto found = again.Start();
    ASSERT_TRUE(found.ok() && found->has_value());
    EXPECT_EQ((*found)->manifest.step, 2);
    FakeState st(layout_, r, 2, -1);
    ASSERT_TRUE(again.Load(**found, st).ok());
    EXPECT_EQ(st.values, FakeState(layout_, r, 2, 2).values);
  }
  // One process still checks every file before choosing: it falls back at once.
  CheckpointManager single(opts_, {}, layout_);
  auto found = single.Start();
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->manifest.step, 2);
}

TEST_F(ManagerTest, ResumeOntoOtherShardingIsExact) {
  {
    CheckpointManager mgr(opts_, {}, layout_);
    ASSERT_TRUE(mgr.Start().ok());
    FakeState st(layout_, 0, 1, 3);
    ASSERT_TRUE(mgr.Save(Request(2), st).ok());
    ASSERT_TRUE(mgr.Finish().ok());
  }
  for (int shards : {2, 3}) {
    for (int s = 0; s < shards; ++s) {
      RankPlacement p;
      p.rank = s;
      p.world.world_size = shards;
      p.world.shard_degree = shards;
      p.shard_rank = s;
      CheckpointManager mgr(opts_, p, layout_);
      auto found = mgr.Start();
      ASSERT_TRUE(found.ok() && found->has_value());
      FakeState st(layout_, s, shards, -1);
      ASSERT_TRUE(mgr.Load(**found, st).ok());
      EXPECT_EQ(st.values, FakeState(layout_, s, shards, 3).values);
    }
  }
  EXPECT_NE(logs_.text().find("warning: resharding"), std::string::npos);
}

TEST_F(ManagerTest, DiskFullWithPolicyContinueKeepsTrainingAndPreviousCheckpoint) {
  opts_.failure_policy = FailurePolicy::kContinue;
  CheckpointManager mgr(opts_, {}, layout_);
  ASSERT_TRUE(mgr.Start().ok());
  FakeState st(layout_, 0, 1, 1);
  ASSERT_TRUE(mgr.Save(Request(2), st).ok());
  ASSERT_TRUE(mgr.Finish().ok());
  SetWriteFailureBudget(100);
  ASSERT_TRUE(mgr.Save(Request(4), st).ok());  // snapshot fine; write fails in background
  EXPECT_TRUE(mgr.Finish().ok());              // continue: reported, not returned
  SetWriteFailureBudget(-1);
  EXPECT_EQ(mgr.stats().saves_failed, 1);
  EXPECT_NE(logs_.text().find("error: checkpoint of step 4 FAILED"), std::string::npos) << logs_.text();
  EXPECT_NE(logs_.text().find("No space left on device"), std::string::npos) << logs_.text();
  EXPECT_NE(logs_.text().find(".step-4.tmp-0/shard-00000-of-00001.bin"), std::string::npos) << logs_.text();
  auto found = FindLatestCheckpoint(root_, true);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->manifest.step, 2);
  // The next save works again.
  ASSERT_TRUE(mgr.Save(Request(6), st).ok());
  ASSERT_TRUE(mgr.Finish().ok());
  EXPECT_EQ(FindLatestCheckpoint(root_, true)->manifest.step, 6);
}

TEST_F(ManagerTest, DiskFullWithPolicyStopReturnsTheError) {
  opts_.failure_policy = FailurePolicy::kStop;
  opts_.async_save = false;
  CheckpointManager mgr(opts_, {}, layout_);
  ASSERT_TRUE(mgr.Start().ok());
  FakeState st(layout_, 0, 1, 1);
  SetWriteFailureBudget(0);
  Status s = mgr.Save(Request(2), st);
  SetWriteFailureBudget(-1);
  EXPECT_EQ(s.code(), StatusCode::kIo);
  EXPECT_NE(s.message().find("No space left on device"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("failure_policy=stop"), std::string::npos) << s.ToString();
  EXPECT_TRUE(ListCheckpoints(root_).empty());
}

TEST_F(ManagerTest, TimeBasedSavesAgreeAcrossRanksThroughRequestFiles) {
  opts_.every_n_train_steps = 0;
  opts_.every_n_minutes = 1e-9;  // always due by the clock
  std::vector<std::unique_ptr<CheckpointManager>> ranks;
  for (int r = 0; r < 2; ++r) {
    RankPlacement p;
    p.rank = r;
    p.world.world_size = 2;
    p.world.replica_degree = 2;
    p.replica_rank = r;
    ranks.push_back(std::make_unique<CheckpointManager>(opts_, p, layout_));
    ASSERT_TRUE(ranks.back()->Start().ok());
  }
  std::vector<std::vector<int64_t>> saved(2);
  for (int64_t step = 1; step <= 6; ++step) {
    for (int r = 0; r < 2; ++r) {
      auto due = ranks[r]->ShouldSave(step);
      ASSERT_TRUE(due.ok()) << due.status().ToString();
      if (*due) saved[r].push_back(step);
    }
  }
  // Rank 0 asks at step 1 for step 3 and, after that save, at 4 for 6... but
  // no save happened here, so it asks once per pending request.
  EXPECT_EQ(saved[0], saved[1]);
  EXPECT_FALSE(saved[0].empty());
  EXPECT_EQ(saved[0].front(), 3);
}

TEST_F(ManagerTest, StartOptions) {
  {
    CheckpointManager mgr(opts_, {}, layout_);
    ASSERT_TRUE(mgr.Start().ok());
    FakeState st(layout_, 0, 1, 1);
    ASSERT_TRUE(mgr.Save(Request(2), st).ok());
    ASSERT_TRUE(mgr.Save(Request(4), st).ok());
    ASSERT_TRUE(mgr.Finish().ok());
  }
  fs::create_directories(root_ + "/.step-6.tmp-0");
  auto o = opts_;
  o.start_fresh = true;
  CheckpointManager fresh(o, {}, layout_);
  auto f = fresh.Start();
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->has_value());
  EXPECT_FALSE(fs::exists(root_ + "/.step-6.tmp-0"));  // stale temporaries cleaned

  o = opts_;
  o.resume_from_checkpoint = root_ + "/step-2";
  CheckpointManager forced(o, {}, layout_);
  f = forced.Start();
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->manifest.step, 2);

  o.resume_from_checkpoint = root_ + "/step-3";
  CheckpointManager missing(o, {}, layout_);
  EXPECT_NE(missing.Start().status().message().find("resume_from_checkpoint " + root_ + "/step-3 is not usable"),
            std::string::npos);

  o = opts_;
  o.save_top_k = 0;
  CheckpointManager bad(o, {}, layout_);
  EXPECT_EQ(bad.Start().status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseFailurePolicy("maybe").ok());
}

}  // namespace
}  // namespace hypertrain::ckpt
