// cuda.attention_impl: every name parses to its own value and back, the
// config's enum is this one (no second table), and a bad name is an error
// naming the key and the accepted names.
#include "runtime/kernels/attention_impl.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <type_traits>

#include "runtime/config/config.h"

namespace hypertrain::kernels {
namespace {

TEST(AttentionImpl, EveryNameRoundTripsToADistinctValue) {
  static_assert(std::is_same_v<config::AttentionImpl, AttentionImpl>);
  const std::vector<std::string> want = {"auto", "cudnn", "cudnn-fast", "cudnn-fwd", "tiled", "simple"};
  EXPECT_EQ(AttentionImplNames(), want);
  std::set<AttentionImpl> seen;
  for (const std::string& name : AttentionImplNames()) {
    StatusOr<AttentionImpl> impl = ParseAttentionImpl(name);
    ASSERT_TRUE(impl.ok()) << name;
    EXPECT_EQ(AttentionImplName(*impl), name);
    EXPECT_TRUE(seen.insert(*impl).second) << name;
  }
}

// The values the CUDA backend and kernels compare with keep their meaning.
TEST(AttentionImpl, NamesMatchTheKernelsValues) {
  const std::pair<AttentionImpl, const char*> table[] = {
      {AttentionImpl::kTiled, "tiled"},          {AttentionImpl::kSimple, "simple"},
      {AttentionImpl::kCudnn, "cudnn"},          {AttentionImpl::kCudnnFast, "cudnn-fast"},
      {AttentionImpl::kCudnnForward, "cudnn-fwd"}, {AttentionImpl::kAuto, "auto"},
  };
  for (const auto& [impl, name] : table) {
    EXPECT_EQ(std::string(AttentionImplName(impl)), name);
    EXPECT_EQ(*ParseAttentionImpl(name), impl);
  }
}

// Every value reaches the trainer config as the same enum value (file and
// environment paths), i.e. what the CUDA backend's SetKernelOptions receives.
TEST(AttentionImpl, EveryConfigValueReachesTheConfigAsTheSameEnum) {
  for (const std::string& name : AttentionImplNames()) {
    StatusOr<config::CudaConfig> c = config::CudaConfigFromEnv([&](const char* var) -> const char* {
      return std::string(var) == "HT_ATTENTION_IMPL" ? name.c_str() : nullptr;
    });
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().ToString();
    EXPECT_EQ(c->attention_impl, *ParseAttentionImpl(name)) << name;
  }
}

TEST(AttentionImpl, BadNameNamesTheKeyAndTheAcceptedNames) {
  StatusOr<AttentionImpl> bad = ParseAttentionImpl("flash");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "cuda.attention_impl: 'flash' is not one of auto, cudnn, cudnn-fast, cudnn-fwd, tiled, simple");
}

}  // namespace
}  // namespace hypertrain::kernels
