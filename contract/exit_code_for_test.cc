// Every StatusCode ends a process with the code the contract's retry class
// expects (contract/exit_codes.h).
#include "contract/exit_code_for.h"

#include <gtest/gtest.h>

namespace hypertrain::contract {
namespace {

TEST(ExitCodes, EveryStatusCodeHasItsExitCode) {
  const std::pair<StatusCode, int> expected[] = {
      {StatusCode::kOk, kExitOk},
      {StatusCode::kInvalidArgument, kExitConfigError},
      {StatusCode::kPermissionDenied, kExitConfigError},
      {StatusCode::kUnauthenticated, kExitConfigError},
      {StatusCode::kNotFound, kExitDataError},
      {StatusCode::kDataLoss, kExitDataError},
      {StatusCode::kDeadlineExceeded, kExitCollectiveTimeout},
      {StatusCode::kUnavailable, kExitRetryable},
      {StatusCode::kIo, kExitRetryable},
      {StatusCode::kResourceExhausted, kExitRetryable},
      {StatusCode::kAborted, kExitRetryable},
      {StatusCode::kExpired, kExitRetryable},
      {StatusCode::kCancelled, kExitTerminated},
      {StatusCode::kFailedPrecondition, kExitInternal},
      {StatusCode::kUnimplemented, kExitInternal},
      {StatusCode::kAlreadyExists, kExitInternal},
      {StatusCode::kUnknown, kExitInternal},
      {StatusCode::kInternal, kExitInternal},
  };
  // The table names every enumerator (kUnimplemented is the last one).
  EXPECT_EQ(std::size(expected), static_cast<size_t>(StatusCode::kUnimplemented) + 1);
  for (const auto& [code, exit_code] : expected) {
    const Status s = code == StatusCode::kOk ? Status::Ok() : Status(code, "x");
    EXPECT_EQ(ExitCodeFor(s), exit_code) << StatusCodeName(code);
  }
}

TEST(ExitCodes, RetryClassesFollow) {
  EXPECT_EQ(RetryClassOf(ExitCodeFor(PermissionDenied("open /ckpt: EACCES"))), RetryClass::kNever);
  EXPECT_EQ(RetryClassOf(ExitCodeFor(ResourceExhausted("429"))), RetryClass::kRetry);
  EXPECT_EQ(RetryClassOf(ExitCodeFor(IoError("write: ENOSPC"))), RetryClass::kRetry);
  EXPECT_EQ(RetryClassOf(ExitCodeFor(Cancelled("shutdown"))), RetryClass::kRetry);
  EXPECT_EQ(RetryClassOf(ExitCodeFor(Unknown("?"))), RetryClass::kNotByDefault);
  EXPECT_EQ(ExitCodeFor(Status(static_cast<StatusCode>(999), "out of range")), kExitInternal);
}

}  // namespace
}  // namespace hypertrain::contract
