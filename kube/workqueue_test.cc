#include "kube/workqueue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

namespace kube {
namespace {

using namespace std::chrono_literals;

TEST(WorkQueueTest, DeduplicatesWaitingKeys) {
  WorkQueue q;
  q.Add("a");
  q.Add("b");
  q.Add("a");
  EXPECT_EQ(q.Len(), 2u);
  EXPECT_EQ(*q.Get(), "a");
  EXPECT_EQ(*q.Get(), "b");
  EXPECT_FALSE(q.GetFor(20ms).has_value());
}

TEST(WorkQueueTest, KeyAddedWhileProcessingIsRequeuedOnDone) {
  WorkQueue q;
  q.Add("a");
  auto k = q.Get();
  ASSERT_EQ(*k, "a");
  q.Add("a");  // while processing: must not be handed out concurrently
  q.Add("a");
  EXPECT_FALSE(q.GetFor(30ms).has_value());
  q.Done("a");
  auto again = q.GetFor(1s);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, "a");
  q.Done("a");
  EXPECT_FALSE(q.GetFor(30ms).has_value());  // both adds collapsed into one
}

TEST(WorkQueueTest, NeverTwoWorkersOnOneKey) {
  WorkQueue q;
  std::mutex mu;
  std::map<std::string, int> active;
  std::atomic<int> processed{0};
  std::atomic<bool> overlap{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w)
    workers.emplace_back([&] {
      while (auto k = q.Get()) {
        {
          std::lock_guard<std::mutex> l(mu);
          if (active[*k]++ > 0) overlap = true;
        }
        std::this_thread::sleep_for(200us);
        {
          std::lock_guard<std::mutex> l(mu);
          active[*k]--;
        }
        processed++;
        q.Done(*k);
      }
    });
  for (int i = 0; i < 3000; ++i) q.Add("k" + std::to_string(i % 5));
  // Drain: wait until idle, then shut down.
  for (int i = 0; i < 500 && (q.Len() > 0); ++i) std::this_thread::sleep_for(2ms);
  std::this_thread::sleep_for(20ms);
  q.ShutDown();
  for (auto& t : workers) t.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_GT(processed.load(), 0);
}

TEST(WorkQueueTest, AddAfterAndRateLimitedBackoff) {
  WorkQueueOptions o;
  o.base_delay = 20ms;
  o.max_delay = 200ms;
  o.overall_qps = 0;
  WorkQueue q(o);
  auto t0 = std::chrono::steady_clock::now();
  q.AddAfter("x", 50ms);
  q.AddAfter("x", 500ms);  // the earlier time wins
  auto k = q.GetFor(2s);
  ASSERT_TRUE(k.has_value());
  auto dt = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(dt, 45ms);
  EXPECT_LT(dt, 1500ms);
  q.Done("x");
  // Exponential per-key backoff: 20, 40, 80 ms...
  std::vector<std::chrono::steady_clock::duration> waits;
  for (int i = 0; i < 4; ++i) {
    auto s = std::chrono::steady_clock::now();
    q.AddRateLimited("y");
    auto y = q.GetFor(2s);
    ASSERT_TRUE(y.has_value());
    waits.push_back(std::chrono::steady_clock::now() - s);
    q.Done("y");
  }
  EXPECT_EQ(q.NumRequeues("y"), 4);
  EXPECT_GE(waits[0], 18ms);
  EXPECT_GE(waits[2], 75ms);
  EXPECT_GE(waits[3], 150ms);
  EXPECT_LT(waits[3], 1500ms);  // capped at max_delay (200 ms) plus scheduling slack
  q.Forget("y");
  EXPECT_EQ(q.NumRequeues("y"), 0);
  auto s = std::chrono::steady_clock::now();
  q.AddRateLimited("y");
  ASSERT_TRUE(q.GetFor(2s).has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - s, 1000ms);  // back to base_delay (20 ms) + slack
}

TEST(WorkQueueTest, ShutDownWakesBlockedGetters) {
  WorkQueue q;
  std::atomic<int> returned{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 3; ++i)
    ts.emplace_back([&] {
      EXPECT_FALSE(q.Get().has_value());
      returned++;
    });
  std::this_thread::sleep_for(20ms);
  q.AddAfter("later", 10s);
  q.ShutDown();
  for (auto& t : ts) t.join();
  EXPECT_EQ(returned.load(), 3);
  q.Add("ignored");
  EXPECT_EQ(q.Len(), 0u);
}

// Records what the queue reports, as the operator's Prometheus series would.
struct RecordingMetrics : WorkQueueMetrics {
  int added = 0, retried = 0;
  std::vector<size_t> depths;
  std::vector<double> waited, worked;
  void Added() override { ++added; }
  void Depth(size_t n) override { depths.push_back(n); }
  void Waited(double s) override { waited.push_back(s); }
  void Worked(double s) override { worked.push_back(s); }
  void Retried() override { ++retried; }
};

TEST(WorkQueueTest, ReportsAddsDepthWaitWorkAndRetries) {
  RecordingMetrics m;
  WorkQueueOptions o;
  o.metrics = &m;
  o.base_delay = 1ms;
  WorkQueue q(o);
  q.Add("a");
  q.Add("b");
  q.Add("a");  // a duplicate is not an add
  EXPECT_EQ(m.added, 2);
  EXPECT_EQ(m.depths, (std::vector<size_t>{1, 2}));
  std::this_thread::sleep_for(20ms);
  auto k = q.Get();
  ASSERT_EQ(*k, "a");
  EXPECT_EQ(m.depths.back(), 1u);
  ASSERT_EQ(m.waited.size(), 1u);
  EXPECT_GE(m.waited[0], 0.015);
  std::this_thread::sleep_for(10ms);
  q.Done("a");
  ASSERT_EQ(m.worked.size(), 1u);
  EXPECT_GE(m.worked[0], 0.008);
  q.AddRateLimited("a");  // a retry, queued after its backoff by the delay thread
  EXPECT_EQ(m.retried, 1);
  ASSERT_EQ(*q.GetFor(1s), "b");
  auto again = q.GetFor(1s);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, "a");
  EXPECT_EQ(m.added, 3);
  EXPECT_EQ(m.waited.size(), 3u);
  EXPECT_EQ(m.depths.back(), 0u);
}

}  // namespace
}  // namespace kube
