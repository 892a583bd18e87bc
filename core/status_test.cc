#include "core/status.h"

#include <gtest/gtest.h>

namespace hypertrain {
namespace {

StatusOr<int> ParsePositive(int x) {
  if (x <= 0) return InvalidArgument("x must be > 0, got " + std::to_string(x));
  return x;
}

Status UsesMacros(int x, int* out) {
  HT_ASSIGN_OR_RETURN(*out, ParsePositive(x));
  HT_RETURN_IF_ERROR(Status::Ok());
  return Status::Ok();
}

TEST(Status, CarriesCodeAndMessage) {
  Status s = InvalidArgument("model.hidden_size must be > 0");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: model.hidden_size must be > 0");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(StatusOr, PropagatesThroughMacros) {
  int v = 0;
  EXPECT_TRUE(UsesMacros(7, &v).ok());
  EXPECT_EQ(v, 7);
  Status bad = UsesMacros(-1, &v);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "x must be > 0, got -1");
}

}  // namespace
}  // namespace hypertrain
