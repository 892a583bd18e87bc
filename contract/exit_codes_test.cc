#include "contract/exit_codes.h"

#include <gtest/gtest.h>

#include <csignal>
#include <set>

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
  // A user command's own errors are permanent by default (Kubeflow's policy).
  EXPECT_EQ(RetryClassOf(126), RetryClass::kNotByDefault);
  EXPECT_EQ(RetryClassOf(127), RetryClass::kNotByDefault);
  EXPECT_EQ(RetryClassOf(128), RetryClass::kRetry);
  EXPECT_EQ(RetryClassOf(255), RetryClass::kRetry);
  static_assert(RetryClassOf(kExitConfigError) == RetryClass::kNever);
}

TEST(ExitCodes, EveryCodeBelowTheSignalsFailsAndEveryCodeAboveRetriesByDefault) {
  const std::set<int> none;
  for (int code = 1; code < 256; ++code) {
    EXPECT_EQ(IsRetryable(code, none, none), code >= kExitSignalBase) << code;
  }
  EXPECT_FALSE(IsRetryable(kExitOk, none, none));
}

TEST(ExitCodes, OverridesMoveCodesBetweenTheClassesButNeverRetryAConfigError) {
  const std::set<int> retryable = {1, 3, 127, kExitConfigError};
  const std::set<int> non_retryable = {137, 200};
  EXPECT_TRUE(IsRetryable(1, retryable, non_retryable));
  EXPECT_TRUE(IsRetryable(127, retryable, non_retryable));
  EXPECT_FALSE(IsRetryable(4, retryable, non_retryable));
  EXPECT_FALSE(IsRetryable(kExitConfigError, retryable, non_retryable));
  EXPECT_FALSE(IsRetryable(137, retryable, non_retryable));
  EXPECT_FALSE(IsRetryable(kExitRetryable, retryable, non_retryable));
  EXPECT_TRUE(IsRetryable(kExitCollectiveTimeout, retryable, non_retryable));
  EXPECT_TRUE(IsRetryable(143, retryable, non_retryable));
}

}  // namespace
}  // namespace hypertrain::contract
