#include "kube/controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>

namespace kube {
namespace {

using namespace std::chrono_literals;

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds t = 5s) {
  auto deadline = std::chrono::steady_clock::now() + t;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return pred();
}

WorkQueueOptions Fast() {
  WorkQueueOptions o;
  o.base_delay = 5ms;
  o.max_delay = 50ms;
  o.overall_qps = 0;
  return o;
}

TEST(ControllerTest, ErrorsBackOffThenForgetOnSuccess) {
  WorkQueue q(Fast());
  std::atomic<int> calls{0};
  std::vector<std::string> errors;
  std::mutex mu;
  Controller c(
      &q,
      [&](const std::string&) -> StatusOr<ReconcileResult> {
        // A Conflict as a watch ERROR event carries it (no HTTP status).
        if (calls.fetch_add(1) < 2)
          return ErrorFromStatusObject(0, Json{{"reason", "Conflict"}, {"message", "try again"}});
        return ReconcileResult{};
      },
      2,
      [&](const std::string& k, const Status& e) {
        std::lock_guard<std::mutex> l(mu);
        errors.push_back(k + ": " + e.ToString());
      });
  c.Start();
  q.Add("ns/job");
  ASSERT_TRUE(WaitFor([&] { return calls.load() == 3; }));
  ASSERT_TRUE(WaitFor([&] { return q.NumRequeues("ns/job") == 0; }));  // forgotten after success
  std::this_thread::sleep_for(60ms);
  EXPECT_EQ(calls.load(), 3);  // no further passes
  c.Stop();
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], "ns/job: Conflict: try again");
}

TEST(ControllerTest, RequeueAfterAndExceptions) {
  WorkQueue q(Fast());
  std::mutex mu;
  std::map<std::string, std::vector<std::chrono::steady_clock::time_point>> seen;
  Controller c(
      &q,
      [&](const std::string& k) -> StatusOr<ReconcileResult> {
        size_t n;
        {
          std::lock_guard<std::mutex> l(mu);
          seen[k].push_back(std::chrono::steady_clock::now());
          n = seen[k].size();
        }
        if (k == "throws" && n == 1) throw std::runtime_error("bad object");
        if (k == "periodic" && n < 3) return ReconcileResult{false, 100ms};
        return ReconcileResult{};
      },
      3);
  c.Start();
  q.Add("periodic");
  q.Add("throws");
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> l(mu);
    return seen["periodic"].size() == 3 && seen["throws"].size() == 2;
  }));
  c.Stop();
  std::lock_guard<std::mutex> l(mu);
  EXPECT_GE(seen["periodic"][1] - seen["periodic"][0], 95ms);
  EXPECT_GE(seen["periodic"][2] - seen["periodic"][1], 95ms);
}

}  // namespace
}  // namespace kube
