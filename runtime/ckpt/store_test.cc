#include "runtime/ckpt/store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/testing/log_capture.h"
#include "runtime/ckpt/test_util.h"

namespace hypertrain::ckpt {
namespace {

namespace fs = std::filesystem;
using testing::Expected;
using testing::MakeLayout;
using testing::SaveAll;

WorldLayout World(int nnodes, int per_node, int shard_degree) {
  WorldLayout w;
  w.nnodes = nnodes;
  w.world_size = nnodes * per_node;
  w.shard_degree = shard_degree;
  w.replica_degree = w.world_size / shard_degree;
  w.strategy = "hsdp";
  return w;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/store_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { SetWriteFailureBudget(-1); }
  std::string root_;
  hypertrain::testing::LogCapture logs_;
};

TEST_F(StoreTest, CommitWritesManifestAndOnlyReplicaZeroWritesShards) {
  const auto d = MakeLayout(2, 4, 4);
  ASSERT_TRUE(SaveAll(root_, d, World(2, 2, 2), 10).ok());
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(root_ + "/step-10")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"manifest.json", "shard-00000-of-00002.bin", "shard-00001-of-00002.bin"}));
  auto m = VerifyCheckpoint(root_ + "/step-10", true);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->step, 10);
  EXPECT_EQ(m->tokens_seen, 10000);
  EXPECT_EQ(m->world.world_size, 4);
  ASSERT_EQ(m->ranks.size(), 4u);
  EXPECT_EQ(m->ranks[3].sampler["position"], 1003);
  EXPECT_EQ(m->trainer_state["lr"], 0.5);
  // Only hidden temporaries would remain if something went wrong.
  for (auto& e : fs::directory_iterator(root_)) EXPECT_EQ(e.path().filename().string(), "step-10");
}

// Save with one world layout, load with every other: identical values.
TEST_F(StoreTest, ReshardingRoundTrips) {
  struct L {
    WorldLayout w;
    int64_t align, pad;
  };
  const std::vector<L> layouts = {{World(2, 2, 2), 4, 2}, {World(1, 4, 4), 4, 4},  {World(1, 1, 1), 1, 1},
                                  {World(2, 1, 1), 8, 1}, {World(2, 2, 4), 4, 8},  {World(1, 3, 3), 2, 3}};
  int64_t step = 1;
  for (const L& a : layouts) {
    const auto da = MakeLayout(3, a.align, a.pad);
    ASSERT_TRUE(SaveAll(root_, da, a.w, step, /*salt=*/step).ok());
    auto m = VerifyCheckpoint(root_ + "/step-" + std::to_string(step), true);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto reader = CheckpointReader::Open(root_ + "/step-" + std::to_string(step), *m);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    for (const L& b : layouts) {
      const auto db = MakeLayout(3, b.align, b.pad);
      ASSERT_TRUE(reader->CheckCompatible(db).ok());
      for (int s = 0; s < b.w.shard_degree; ++s) {
        for (const UnitEntry& u : db.units) {
          const ElemRange r = EvenShard(u.padded_numel, s, b.w.shard_degree);
          std::array<std::vector<float>, kNumStates> got;
          for (auto& g : got) g.assign(r.size(), -1.0f);
          ASSERT_TRUE(reader->ReadRange(u, r, {got[0].data(), got[1].data(), got[2].data()}).ok());
          for (int k = 0; k < kNumStates; ++k) {
            ASSERT_EQ(got[k], Expected(db, u.index, r, k, step)) << "unit " << u.name << " state " << k;
          }
        }
      }
    }
    ++step;
  }
}

TEST_F(StoreTest, IncompatibleModelIsRejectedByName) {
  ASSERT_TRUE(SaveAll(root_, MakeLayout(2, 4, 4), World(1, 1, 1), 1).ok());
  auto m = VerifyCheckpoint(root_ + "/step-1", true);
  auto reader = CheckpointReader::Open(root_ + "/step-1", *m);
  Status s = reader->CheckCompatible(MakeLayout(3, 4, 4));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = reader->CheckCompatible(MakeLayout(2, 4, 4, /*C=*/8));
  EXPECT_NE(s.message().find("shape differs"), std::string::npos) << s.ToString();
}

TEST_F(StoreTest, CorruptTruncatedOrIncompleteNewestFallsBackWithWarning) {
  const auto d = MakeLayout(2, 4, 4);
  for (int step : {1, 2, 3, 4}) ASSERT_TRUE(SaveAll(root_, d, World(1, 2, 2), step).ok());
  // 4: one flipped byte in the data; 3: truncated shard; 2: no manifest.
  {
    const std::string p = root_ + "/step-4/shard-00001-of-00002.bin";
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  fs::resize_file(root_ + "/step-3/shard-00000-of-00002.bin", fs::file_size(root_ + "/step-3/shard-00000-of-00002.bin") - 3);
  fs::remove(root_ + "/step-2/manifest.json");
  // A never-committed temporary of step 5 is invisible.
  fs::create_directories(root_ + "/.step-5.tmp-0");
  auto found = FindLatestCheckpoint(root_, true);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->manifest.step, 1);
  EXPECT_NE(logs_.text().find("warning: skipping checkpoint " + root_ + "/step-4: DATA_LOSS"), std::string::npos) << logs_.text();
  EXPECT_NE(logs_.text().find("corrupt"), std::string::npos) << logs_.text();
  EXPECT_NE(logs_.text().find("truncated"), std::string::npos) << logs_.text();
  EXPECT_NE(logs_.text().find("no manifest.json"), std::string::npos) << logs_.text();
  // Without full checksums the flipped byte is not seen (sizes still are).
  auto quick = FindLatestCheckpoint(root_, false);
  EXPECT_EQ(quick->manifest.step, 4);
  // A garbled manifest is reported as such.
  ASSERT_TRUE(WriteFileAtomically(root_ + "/step-1/manifest.json", "{\"format\": \"hypertrain-chec").ok());
  // Checkpoints exist and none verifies: DataLoss listing each (never the
  // NotFound of an empty directory, which would start from scratch).
  const Status none = FindLatestCheckpoint(root_, true).status();
  EXPECT_EQ(none.code(), StatusCode::kDataLoss);
  EXPECT_NE(none.message().find("4 checkpoint(s) under " + root_ + " and none is usable"), std::string::npos)
      << none.message();
  for (int s = 1; s <= 4; ++s) {
    EXPECT_NE(none.message().find(root_ + "/step-" + std::to_string(s) + ": "), std::string::npos) << s;
  }
  EXPECT_NE(logs_.text().find("not valid JSON"), std::string::npos) << logs_.text();
  ASSERT_TRUE(CleanStaleTemporaries(root_).ok());
  EXPECT_FALSE(fs::exists(root_ + "/.step-5.tmp-0"));
}

TEST_F(StoreTest, RetentionKeepsNewestK) {
  const auto d = MakeLayout(1, 4, 4);
  for (int step = 1; step <= 5; ++step) {
    ASSERT_TRUE(SaveAll(root_, d, World(1, 1, 1), step * 10).ok());
    ASSERT_TRUE(ApplyRetention(root_, 2, step * 10).ok());
  }
  auto all = ListCheckpoints(root_);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 40);
  EXPECT_EQ(all[1].first, 50);
  ASSERT_TRUE(ApplyRetention(root_, -1, 0).ok());
  EXPECT_EQ(ListCheckpoints(root_).size(), 2u);
}

TEST_F(StoreTest, DiskFullDuringSaveLeavesPreviousCheckpointIntact) {
  const auto d = MakeLayout(2, 4, 4);
  ASSERT_TRUE(SaveAll(root_, d, World(1, 2, 2), 1).ok());
  SetWriteFailureBudget(300);
  Status s = SaveAll(root_, d, World(1, 2, 2), 2);
  SetWriteFailureBudget(-1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("No space left on device"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(".step-2.tmp-0/shard-00000-of-00002.bin"), std::string::npos) << s.ToString();
  auto found = FindLatestCheckpoint(root_, true);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->manifest.step, 1);
  ASSERT_TRUE(CleanStaleTemporaries(root_).ok());
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1);
}

TEST_F(StoreTest, CoordinatorTimesOutNamingMissingRanks) {
  const auto d = MakeLayout(1, 4, 4);
  auto shard = testing::MakeShard(d, 0, 2);
  ShardData v = shard.View();
  SaveTarget t;
  t.root = root_;
  t.step = 7;
  t.world_size = 3;
  t.shard_degree = 2;
  t.coordinator_timeout_s = 0.05;
  ASSERT_TRUE(WriteRankFiles(t, &v, {0, {}, {}}).ok());
  Manifest m;
  m.world = World(1, 3, 2);
  m.world.replica_degree = 1;
  m.world.world_size = 2;
  auto r = CommitCheckpoint(t, m);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("ranks [1,2]"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(fs::exists(root_ + "/step-7"));
  // A shutting-down owner makes the coordinator give up at once.
  std::atomic<bool> cancel{true};
  t.cancel = &cancel;
  t.coordinator_timeout_s = 600;
  r = CommitCheckpoint(t, m);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("abandoned"), std::string::npos) << r.status().ToString();
  // A rank that failed is reported without waiting for the timeout.
  cancel = false;
  t.rank = 1;
  ReportRankFailure(t, IoError("write x: No space left on device"));
  r = CommitCheckpoint(t, m);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("rank 1 failed to write its part: IO_ERROR: write x: No space"), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace hypertrain::ckpt
