#include "contract/exit_codes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>

namespace hypertrain::contract {
namespace {

TEST(ExitCodes, RetryClassOfEachCode) {
  EXPECT_EQ(RetryClassOf(kExitOk), RetryClass::kSuccess);
  EXPECT_EQ(RetryClassOf(kExitConfigError), RetryClass::kNever);
  EXPECT_EQ(RetryClassOf(kExitInternal), RetryClass::kNotByDefault);
  EXPECT_EQ(RetryClassOf(kExitDataError), RetryClass::kNotByDefault);
  EXPECT_EQ(RetryClassOf(kExitRetryable), RetryClass::kRetry);
  EXPECT_EQ(RetryClassOf(kExitCollectiveTimeout), RetryClass::kRetry);
  EXPECT_EQ(RetryClassOf(kExitSignalBase + SIGKILL), RetryClass::kRetry);
  EXPECT_EQ(RetryClassOf(kExitSignalBase + SIGTERM), RetryClass::kRetry);
  EXPECT_EQ(RetryClassOf(127), RetryClass::kRetry);  // not ours: the backoff budget decides
  static_assert(RetryClassOf(kExitConfigError) == RetryClass::kNever);
}

TEST(ExitCodes, DefaultNonRetryableListIsEveryCodeThatFailsTheJob) {
  for (int code = 0; code < 256; ++code) {
    const RetryClass c = RetryClassOf(code);
    const bool listed = std::find(kDefaultNonRetryableExitCodes.begin(), kDefaultNonRetryableExitCodes.end(),
                                  code) != kDefaultNonRetryableExitCodes.end();
    EXPECT_EQ(listed, c == RetryClass::kNever || c == RetryClass::kNotByDefault) << code;
  }
  EXPECT_TRUE(std::is_sorted(kDefaultNonRetryableExitCodes.begin(), kDefaultNonRetryableExitCodes.end()));
}

}  // namespace
}  // namespace hypertrain::contract
