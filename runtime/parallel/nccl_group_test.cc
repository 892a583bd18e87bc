// NCCL collectives across one process per GPU (2 or 4 GPUs; skips with fewer).
// The parent never touches CUDA: it forks the ranks (and a probe that counts
// devices), since a CUDA context does not survive fork.
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/launch/tcp_store.h"
#include "runtime/parallel/bf16.h"
#include "runtime/parallel/multiprocess_testing.h"
#include "runtime/parallel/nccl_group.h"

namespace hypertrain::parallel {
namespace {

#define CHILD_CHECK(cond, ...)                                            \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::fprintf(stderr, "rank %d: check failed: %s: ", rank, #cond);   \
      std::fprintf(stderr, __VA_ARGS__);                                  \
      std::fprintf(stderr, "\n");                                         \
      return 1;                                                           \
    }                                                                     \
  } while (0)
#define CHILD_OK(expr)                                                    \
  do {                                                                    \
    Status s_ = (expr);                                                   \
    CHILD_CHECK(s_.ok(), "%s", s_.ToString().c_str());                    \
  } while (0)

int GpuCount() {
  auto codes = testing::RunProcesses(1, [](int) {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? std::min(n, 100) : 0;
  }, std::chrono::seconds(60));
  return codes[0] < 0 ? 0 : codes[0];
}

template <typename T>
struct DeviceBuf {
  T* p = nullptr;
  size_t n;
  explicit DeviceBuf(size_t n) : n(n) { cudaMalloc(&p, n * sizeof(T)); }
  ~DeviceBuf() { cudaFree(p); }
  void Put(const std::vector<T>& v) { cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice); }
  std::vector<T> Get() const {
    std::vector<T> v(n);
    cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
};

int Body(int rank, int world, int port) {
  launch::RankEnv e;
  e.node.master_addr = "127.0.0.1";
  e.node.master_port = port;
  e.node.nnodes = world / 2;
  e.node.node_rank = rank / 2;
  e.node.job_id = "nccl-test";
  e.world_size = world;
  e.rank = rank;
  e.local_world_size = 2;
  e.local_rank = rank % 2;
  DistOptions o;
  o.collective_timeout = std::chrono::seconds(60);
  o.rendezvous_timeout = std::chrono::seconds(60);
  auto ctx = CreateNcclDistContext(e, o, rank);
  CHILD_OK(ctx.status());
  ProcessGroup& w = (*ctx)->world();
  const size_t count = 1001;
  DeviceBuf<float> shard(count), full(count * world);
  std::vector<float> h(count);
  for (size_t i = 0; i < count; ++i) h[i] = rank * 10000.f + i;
  shard.Put(h);
  CHILD_OK(w.AllGather(shard.p, full.p, count, DType::kF32)->Wait());
  auto got = full.Get();
  for (int r = 0; r < world; ++r)
    for (size_t i = 0; i < count; ++i)
      CHILD_CHECK(got[r * count + i] == r * 10000.f + i, "all_gather[%d][%zu]", r, i);

  std::vector<float> in(count * world);
  for (size_t j = 0; j < in.size(); ++j) in[j] = (rank + 1) * static_cast<float>(j % 17 + 1);
  full.Put(in);
  CHILD_OK(w.ReduceScatter(full.p, shard.p, count, DType::kF32, ReduceOp::kSum, DType::kF32)->Wait());
  got = shard.Get();
  const float ranksum = world * (world + 1) / 2.0f;
  for (size_t i = 0; i < count; ++i)
    CHILD_CHECK(got[i] == ranksum * ((rank * count + i) % 17 + 1), "reduce_scatter[%zu]=%f", i, got[i]);

  const float x = 1.0f + 1.0f / 512;  // not a bf16: rounds to 1 before a bf16 reduction
  full.Put(std::vector<float>(count * world, x));
  CHILD_OK(w.ReduceScatter(full.p, shard.p, count, DType::kF32, ReduceOp::kSum, DType::kBF16)->Wait());
  for (float v : shard.Get()) CHILD_CHECK(v == static_cast<float>(world), "bf16-reduced %f", v);

  shard.Put(std::vector<float>(count, static_cast<float>(rank)));
  CHILD_OK((*ctx)->shard().AllReduce(shard.p, count, DType::kF32, ReduceOp::kAvg, DType::kF32)->Wait());
  const int node = rank / 2;
  for (float v : shard.Get()) CHILD_CHECK(v == 2 * node + 0.5f, "shard avg %f", v);

  shard.Put(std::vector<float>(count, rank == 1 ? 7.f : 0.f));
  CHILD_OK(w.Broadcast(shard.p, count, DType::kF32, 1)->Wait());
  for (float v : shard.Get()) CHILD_CHECK(v == 7.f, "broadcast %f", v);
  // Host scalars (loss, grad norm) through the device scratch buffer.
  float host[2] = {1.0f * rank, 0.5f};
  CHILD_OK(w.AllReduceHost(host, 2, ReduceOp::kSum));
  CHILD_CHECK(host[0] == world * (world - 1) / 2.0f && host[1] == 0.5f * world, "host all_reduce %f %f",
              host[0], host[1]);
  CHILD_OK(w.Barrier());
  return 0;
}

// Host-only: each group takes the knobs of its kind (runs without a GPU).
// Values come typed from the config (distributed.nccl.*; the HT_NCCL_*
// overrides and their checks are runtime/config's).
TEST(NcclGroupTuning, EachGroupTakesItsKindsKnobs) {
  DistOptions o;
  o.nccl_replica.max_ctas = 4;
  o.nccl_replica.low_priority = true;
  o.nccl_shard.max_ctas = 16;
  const NcclTuning r = NcclTuningFor(o, "replica1");
  EXPECT_EQ(r.max_ctas, 4);
  EXPECT_TRUE(r.low_priority);
  const NcclTuning s = NcclTuningFor(o, "shard0");
  EXPECT_EQ(s.max_ctas, 16);
  EXPECT_FALSE(s.low_priority);
  const NcclTuning w = NcclTuningFor(o, "world");
  EXPECT_EQ(w.max_ctas, 0);
  EXPECT_EQ(NcclTuningFor(o, "other").max_ctas, 0);
}

TEST(NcclCollectives, OneProcessPerGpu) {
  const int gpus = GpuCount();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpus;
  const int world = gpus >= 4 ? 4 : 2;
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  const int port = testing::PickFreePort();
  auto codes = testing::RunProcesses(world, [&](int r) { return Body(r, world, port); },
                                     std::chrono::seconds(240));
  for (int r = 0; r < world; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// A member that never arrives (it died after the rendezvous): ncclCommInitRank
// would wait forever; the start-up deadline ends the rank with the retryable
// code instead (one GPU is enough: the other member never starts).
TEST(NcclGroup, InitThatAMemberNeverJoinsEndsAtTheStartupDeadline) {
  if (GpuCount() < 1) GTEST_SKIP() << "needs a GPU";
  const auto t0 = std::chrono::steady_clock::now();
  auto codes = testing::RunProcesses(1, [](int rank) {
    const launch::StoreIdentity id{"nccl-init-deadline", 0};
    auto server = launch::TcpStoreServer::Start("127.0.0.1", 0, id);
    CHILD_OK(server.status());
    auto client = launch::TcpStoreClient::Connect("127.0.0.1", (*server)->port(), id);
    CHILD_OK(client.status());
    auto g = CreateNcclGroup("lonely", {0, 1}, 0, 0, client->get(), std::chrono::milliseconds(2000), nullptr, {});
    std::fprintf(stderr, "rank %d: CreateNcclGroup returned: %s\n", rank, g.status().ToString().c_str());
    return 1;  // never reached when the deadline works
  }, std::chrono::seconds(60));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(codes[0], 200) << "the retryable code";
  EXPECT_LT(took, 30.0) << "bounded by the start-up deadline (at least 5 s)";
}

}  // namespace
}  // namespace hypertrain::parallel
