// The CUDA backend's device trace (CudaBackend::SetTrace): phases and every
// op of a pass on the recorder's clock, only inside the window. GPU only.
#include <gtest/gtest.h>

#include <map>

#include "runtime/backends/cuda/backend.h"
#include "runtime/testing/cuda_device.h"
#include "runtime/trace/merge.h"
#include "runtime/trace/recorder.h"

namespace hypertrain::cuda {
namespace {

using nlohmann::json;

TEST(CudaTraceTest, PassesInTheWindowGetDeviceSpans) {
  HT_SKIP_WITHOUT_GPU();
  model::ModelConfig cfg = *model::NamedModelConfig("125m");
  cfg.max_context_width = 256;
  model::BackendOptions o;
  o.micro_batch_size = 2;
  o.seq_len = 256;
  auto b = CudaBackend::Create(cfg, o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  trace::Recorder r({0, 1, 0, "gpu", ""});
  (*b)->SetTrace(&r);
  std::vector<int32_t> tokens(512);
  for (int i = 0; i < 512; ++i) tokens[i] = (i * 7919) % 32000;
  model::TokenBatch batch{tokens.data(), tokens.data(), 2, 256, nullptr};
  model::NoOpUnitHooks hooks;
  ASSERT_TRUE((*b)->ZeroGrads().ok());
  ASSERT_TRUE((*b)->ForwardBackward(batch, 1.0f, hooks).ok());  // outside the window
  EXPECT_EQ(r.event_count(), 0);
  r.Start();
  for (int pass = 0; pass < 2; ++pass) {
    ASSERT_TRUE((*b)->ZeroGrads().ok());
    ASSERT_TRUE((*b)->ForwardBackward(batch, 1.0f, hooks).ok());
  }
  r.Stop();
  const json doc = r.ToJson();
  ASSERT_TRUE(trace::Validate(doc).ok()) << trace::Validate(doc).ToString();
  std::map<std::string, int> count;
  std::map<std::string, double> dur;
  double first = 1e300, last = -1e300;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    count[e["name"]]++;
    dur[e["name"]] += e["dur"].get<double>();
    first = std::min(first, e["ts"].get<double>());
    last = std::max(last, e["ts"].get<double>() + e["dur"].get<double>());
  }
  EXPECT_EQ(count["forward"], 2);
  EXPECT_EQ(count["backward"], 2);
  EXPECT_GT(count["gemm"], 2 * 12 * 4);  // per layer: qkv, o, gate|up, down at least
  EXPECT_GT(count["attention"], 0);
  EXPECT_GT(count["lm_head+loss"], 0);
  // The op intervals cover the passes (marks chain from the start of each).
  double ops = 0;
  for (const auto& [name, d] : dur) {
    if (name != "forward" && name != "backward" && name != "data") ops += d;
  }
  EXPECT_NEAR(ops, dur["forward"] + dur["backward"], 0.1 * (dur["forward"] + dur["backward"]));
  // On the host's clock: inside the window's wall time.
  EXPECT_GE(first, 0);
  EXPECT_LE(last, r.NowUs());
  int counters = 0;
  for (const json& e : doc["traceEvents"]) counters += e["ph"] == "C";
  EXPECT_EQ(counters, 2);
}

}  // namespace
}  // namespace hypertrain::cuda
