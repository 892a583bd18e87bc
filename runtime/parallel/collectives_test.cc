// Gloo collectives across 4 real processes on 127.0.0.1, laid out as 2
// "nodes" x 2 ranks (hybrid_shard: shard groups {0,1},{2,3}; replica groups
// {0,2},{1,3}).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "core/log.h"
#include "runtime/parallel/bf16.h"
#include "runtime/parallel/dist_context.h"
#include "runtime/parallel/multiprocess_testing.h"

namespace hypertrain::parallel {
namespace {

#define CHILD_CHECK(cond, ...)                                   \
  do {                                                           \
    if (!(cond)) {                                               \
      std::fprintf(stderr, "rank %d: check failed: %s: ", rank, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                         \
      std::fprintf(stderr, "\n");                                \
      return 1;                                                  \
    }                                                            \
  } while (0)
#define CHILD_OK(expr)                                                          \
  do {                                                                          \
    Status s_ = (expr);                                                         \
    CHILD_CHECK(s_.ok(), "%s", s_.ToString().c_str());                          \
  } while (0)

launch::RankEnv EnvFor(int rank, int world, int local, int port) {
  launch::RankEnv e;
  e.node.master_addr = "127.0.0.1";
  e.node.master_port = port;
  e.node.nnodes = world / local;
  e.node.node_rank = rank / local;
  e.node.job_id = "collectives-test";
  e.world_size = world;
  e.rank = rank;
  e.local_world_size = local;
  e.local_rank = rank % local;
  return e;
}

DistOptions TestOptions() {
  DistOptions o;
  o.gloo.hostname = "127.0.0.1";
  o.collective_timeout = std::chrono::seconds(30);
  o.rendezvous_timeout = std::chrono::seconds(30);
  return o;
}

int CollectivesBody(int rank, int port) {
  auto ctx = DistContext::CreateGloo(EnvFor(rank, 4, 2, port), TestOptions());
  CHILD_OK(ctx.status());
  DistContext& d = **ctx;
  ProcessGroup& w = d.world();
  CHILD_CHECK(w.size() == 4 && w.rank() == rank, "world %d/%d", w.rank(), w.size());
  CHILD_CHECK(d.shard().size() == 2 && d.shard().rank() == rank % 2, "shard rank %d", d.shard().rank());
  CHILD_CHECK(d.replica().size() == 2 && d.replica().rank() == rank / 2, "replica rank %d",
              d.replica().rank());

  // All-gather, odd count, separate and in-place buffers, fp32 and bf16.
  for (size_t count : {1u, 7u, 1001u}) {
    std::vector<float> shard(count), full(count * 4, -1.f);
    for (size_t i = 0; i < count; ++i) shard[i] = rank * 10000.f + i;
    CHILD_OK(w.AllGather(shard.data(), full.data(), count, DType::kF32)->Wait());
    for (int r = 0; r < 4; ++r)
      for (size_t i = 0; i < count; ++i)
        CHILD_CHECK(full[r * count + i] == r * 10000.f + i, "all_gather[%d][%zu]=%f", r, i,
                    full[r * count + i]);
    std::vector<uint16_t> inplace(count * 4, 0);
    for (size_t i = 0; i < count; ++i) inplace[rank * count + i] = static_cast<uint16_t>(rank * 100 + i % 50);
    CHILD_OK(w.AllGather(inplace.data() + rank * count, inplace.data(), count, DType::kBF16)->Wait());
    for (int r = 0; r < 4; ++r)
      for (size_t i = 0; i < count; ++i)
        CHILD_CHECK(inplace[r * count + i] == r * 100 + i % 50, "in-place all_gather[%d][%zu]", r, i);
  }

  // Reduce-scatter (sum, avg; fp32 reduce and bf16 reduce), odd count.
  for (size_t count : {3u, 513u}) {
    std::vector<float> full(count * 4);
    for (size_t j = 0; j < full.size(); ++j) full[j] = (rank + 1) * static_cast<float>(j % 17 + 1);
    std::vector<float> out(count);
    CHILD_OK(w.ReduceScatter(full.data(), out.data(), count, DType::kF32, ReduceOp::kSum, DType::kF32)->Wait());
    for (size_t i = 0; i < count; ++i) {
      const size_t j = rank * count + i;
      CHILD_CHECK(out[i] == 10.f * (j % 17 + 1), "reduce_scatter sum[%zu]=%f", i, out[i]);
    }
    CHILD_OK(w.ReduceScatter(full.data(), out.data(), count, DType::kF32, ReduceOp::kAvg, DType::kF32)->Wait());
    for (size_t i = 0; i < count; ++i) {
      const size_t j = rank * count + i;
      CHILD_CHECK(std::fabs(out[i] - 2.5f * (j % 17 + 1)) < 1e-6f, "reduce_scatter avg[%zu]=%f", i, out[i]);
    }
  }
  {
    // 1 + 2^-9 is not a bf16: a bf16 reduction sees 1.0 from every rank.
    const float x = 1.0f + 1.0f / 512;
    std::vector<float> full(4 * 5, x), out(5);
    CHILD_OK(w.ReduceScatter(full.data(), out.data(), 5, DType::kF32, ReduceOp::kSum, DType::kBF16)->Wait());
    for (float v : out) CHILD_CHECK(v == 4.0f, "bf16-reduced %f", v);
    CHILD_OK(w.ReduceScatter(full.data(), out.data(), 5, DType::kF32, ReduceOp::kSum, DType::kF32)->Wait());
    for (float v : out) CHILD_CHECK(v == 4 * x, "fp32-reduced %f", v);
    std::vector<uint16_t> bfull(4 * 3), bout(3);
    for (size_t j = 0; j < bfull.size(); ++j) bfull[j] = FloatToBf16(static_cast<float>(j + rank));
    CHILD_OK(w.ReduceScatter(bfull.data(), bout.data(), 3, DType::kBF16, ReduceOp::kSum, DType::kBF16)->Wait());
    for (size_t i = 0; i < 3; ++i) {
      const float j = rank * 3 + i;
      CHILD_CHECK(Bf16ToFloat(bout[i]) == 4 * j + 6, "bf16 reduce_scatter %f", Bf16ToFloat(bout[i]));
    }
  }

  // All-reduce in the world, the shard group and the replica group, queued
  // back to back (asynchronous) and waited in order.
  std::vector<float> a(1001), b(3), c(2);
  for (size_t i = 0; i < a.size(); ++i) a[i] = rank + i * 0.5f;
  b = {1.f * rank, 1.f, 2.f};
  c = {1.f * rank, 3.f};
  auto wa = w.AllReduce(a.data(), a.size(), DType::kF32, ReduceOp::kSum, DType::kF32);
  auto wb = d.shard().AllReduce(b.data(), b.size(), DType::kF32, ReduceOp::kSum, DType::kF32);
  auto wc = d.replica().AllReduce(c.data(), c.size(), DType::kF32, ReduceOp::kAvg, DType::kF32);
  CHILD_OK(wa->Wait());
  CHILD_OK(wb->Wait());
  CHILD_OK(wc->Wait());
  for (size_t i = 0; i < a.size(); ++i) CHILD_CHECK(a[i] == 6 + 4 * (i * 0.5f), "all_reduce[%zu]=%f", i, a[i]);
  const int node = rank / 2, local = rank % 2;
  CHILD_CHECK(b[0] == 4 * node + 1 && b[1] == 2 && b[2] == 4, "shard all_reduce %f %f", b[0], b[1]);
  CHILD_CHECK(c[0] == (local + local + 2) / 2.0f && c[1] == 3, "replica avg %f %f", c[0], c[1]);
  std::vector<uint16_t> bf(9);
  for (auto& v : bf) v = FloatToBf16(0.25f * (rank + 1));
  CHILD_OK(w.AllReduce(bf.data(), bf.size(), DType::kBF16, ReduceOp::kSum, DType::kBF16)->Wait());
  for (auto v : bf) CHILD_CHECK(Bf16ToFloat(v) == 2.5f, "bf16 all_reduce %f", Bf16ToFloat(v));

  // Max (FP8 amaxes): host all-reduce, every rank ends with the largest
  // value per element whichever rank held it; and raw bytes (FP8 values)
  // all-gathered as u8, odd count, which no reduction accepts.
  std::vector<float> amax(5);
  for (size_t i = 0; i < amax.size(); ++i) amax[i] = (static_cast<int>(i) % 4 == rank) ? 100.f + i : 0.5f * rank;
  CHILD_OK(w.AllReduceHost(amax.data(), amax.size(), ReduceOp::kMax));
  for (size_t i = 0; i < amax.size(); ++i) {
    CHILD_CHECK(amax[i] == 100.f + i, "max[%zu]=%f", i, amax[i]);
  }
  std::vector<uint8_t> bytes_shard(13), bytes_full(13 * 4, 0);
  for (size_t i = 0; i < bytes_shard.size(); ++i) bytes_shard[i] = static_cast<uint8_t>(rank * 50 + i);
  CHILD_OK(w.AllGather(bytes_shard.data(), bytes_full.data(), bytes_shard.size(), DType::kU8)->Wait());
  for (int r = 0; r < 4; ++r)
    for (size_t i = 0; i < 13; ++i)
      CHILD_CHECK(bytes_full[r * 13 + i] == r * 50 + i, "u8 all_gather[%d][%zu]", r, i);
  CHILD_CHECK(!w.AllReduce(bytes_full.data(), 4, DType::kU8, ReduceOp::kSum, DType::kU8)->Wait().ok(),
              "u8 reduction accepted");
  CHILD_CHECK(!w.AllReduce(bf.data(), 2, DType::kBF16, ReduceOp::kMax, DType::kBF16)->Wait().ok(),
              "bf16 max accepted");

  // Broadcast from a non-zero root, odd size.
  std::vector<float> bc(77, rank == 2 ? 3.5f : 0.f);
  CHILD_OK(w.Broadcast(bc.data(), bc.size(), DType::kF32, 2)->Wait());
  for (float v : bc) CHILD_CHECK(v == 3.5f, "broadcast %f", v);
  CHILD_CHECK(!w.Broadcast(bc.data(), 1, DType::kF32, 7)->Wait().ok(), "bad root accepted");
  CHILD_OK(w.Barrier());
  return 0;
}

TEST(GlooCollectives, FourProcessesTwoNodesByTwo) {
  const int port = testing::PickFreePort();
  ASSERT_GT(port, 0);
  const auto codes = testing::RunProcesses(4, [port](int rank) { return CollectivesBody(rank, port); });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// A rank that stops taking part makes its peers' collective hang; the
// watchdog reports it and the process exits with the hang code.
TEST(GlooCollectives, WatchdogExitsWithHangCodeNamingCollectiveRankAndStep) {
  const int port = testing::PickFreePort();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const auto start = std::chrono::steady_clock::now();
  const auto codes = testing::RunProcesses(2, [&](int rank) {
    if (rank == 0) ::dup2(fds[1], 2);  // capture rank 0's report
    log::Init(log::Format::kText, spdlog::level::info);  // on stderr, as in hypertrain
    ::close(fds[0]);
    ::close(fds[1]);
    DistOptions o = TestOptions();
    o.collective_timeout = std::chrono::milliseconds(500);
    o.hang_exit_code = 201;
    auto ctx = DistContext::CreateGloo(EnvFor(rank, 2, 2, port), o);
    if (!ctx.ok()) return 1;
    (*ctx)->watchdog().SetStep(42);
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // never joins the all-reduce
      return 0;
    }
    std::vector<float> x(10, 1.f);
    auto s = (*ctx)->world().AllReduce(x.data(), x.size(), DType::kF32, ReduceOp::kSum, DType::kF32)->Wait();
    std::fprintf(stderr, "all_reduce returned: %s\n", s.ToString().c_str());
    return 3;  // not reached: the watchdog ends the process first
  }, std::chrono::seconds(20));
  ::close(fds[1]);
  std::string report;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) report.append(buf, n);
  ::close(fds[0]);
  EXPECT_EQ(codes[0], 201) << report;
  // 201 rather than 3 also shows the watchdog fired before rank 1 left at 2.5 s.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(report.find("all_reduce on group 'world'"), std::string::npos) << report;
  EXPECT_NE(report.find("on rank 0 at step 42"), std::string::npos) << report;
  EXPECT_NE(report.find("0.5s (collective_timeout)"), std::string::npos) << report;
  // Rank 1 (asleep, in no collective) is named as the one that stopped.
  EXPECT_NE(report.find("stopped: rank 1 (host "), std::string::npos) << report;
  EXPECT_NE(report.find("node rank 0, local rank 1)"), std::string::npos) << report;
}

}  // namespace
}  // namespace hypertrain::parallel
