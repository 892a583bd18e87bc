#include "contract/profile.h"

#include <gtest/gtest.h>

namespace hypertrain::contract {
namespace {

TEST(ProfileTest, RoundTrips) {
  for (const ProfileRequest& p : {ProfileRequest{0, 5, ""}, ProfileRequest{1200, 3, ""},
                                  ProfileRequest{7, 100, "/fsx/traces, run 2"}}) {
    std::string error;
    const auto back = DecodeProfile(EncodeProfile(p), &error);
    ASSERT_TRUE(back.has_value()) << EncodeProfile(p) << ": " << error;
    EXPECT_EQ(*back, p);
  }
  EXPECT_EQ(EncodeProfile({0, 5, ""}), "num_steps=5");
  EXPECT_EQ(EncodeProfile({10, 2, "/t"}), "start_step=10,num_steps=2,dir=/t");
}

TEST(ProfileTest, MalformedValuesSayWhy) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"num_steps=0", "num_steps must be in 1..100"},
      {"num_steps=101", "num_steps must be in 1..100"},
      {"num_steps=five", "num_steps must be in 1..100"},
      {"start_step=3", "num_steps is required"},
      {"start_step=-1,num_steps=2", "start_step must be a non-negative integer"},
      {"num_steps=2,num_steps=3", "given twice"},
      {"dir=/a,num_steps=3", "num_steps is required"},  // dir takes the rest
      {"steps=2", "unknown key 'steps'"},
      {"num_steps=2,dir=traces", "dir must be an absolute path"},
      {"num_steps=2,", "is not key=value"},
      {"num_steps", "is not key=value"},
  };
  for (const auto& [text, want] : cases) {
    std::string error;
    EXPECT_FALSE(DecodeProfile(text, &error).has_value()) << text;
    EXPECT_NE(error.find(want), std::string::npos) << text << ": " << error;
  }
}

}  // namespace
}  // namespace hypertrain::contract
