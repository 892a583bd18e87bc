#include "core/status.h"

#include <gtest/gtest.h>

#include <memory>

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

TEST(Status, ApiErrorsReadAsTheApiReportedThem) {
  ApiErrorDetail d;
  d.http_status = 404;
  d.reason = "NotFound";
  Status s(StatusCode::kNotFound, "pods \"x\" not found", d);
  EXPECT_EQ(s.ToString(), "NotFound (404): pods \"x\" not found");
  ASSERT_NE(s.api_detail(), nullptr);
  EXPECT_EQ(s.api_detail()->retry_after_seconds, -1);
  EXPECT_EQ(s.http_status(), 404);
  EXPECT_EQ(NotFound("x").http_status(), 0);
  EXPECT_EQ(NotFound("x").api_detail(), nullptr);
  // Copies share the detail; WithMessage keeps code and detail.
  Status longer = s.WithMessage(s.message() + " (after 3 attempts)");
  EXPECT_EQ(longer.code(), StatusCode::kNotFound);
  EXPECT_EQ(longer.http_status(), 404);
  EXPECT_EQ(longer.ToString(), "NotFound (404): pods \"x\" not found (after 3 attempts)");
  EXPECT_EQ(s.message(), "pods \"x\" not found");
}

TEST(Status, InvalidFieldNamesTheField) {
  Status s = InvalidField("spec.nodes", "must be >= 1");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "spec.nodes: must be >= 1");
  EXPECT_EQ(InvalidField("", "not valid YAML").message(), "not valid YAML");
}

TEST(Status, HttpStatusesMapToCodes) {
  EXPECT_EQ(StatusCodeForHttp(400), StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusCodeForHttp(401), StatusCode::kUnauthenticated);
  EXPECT_EQ(StatusCodeForHttp(403), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusCodeForHttp(404), StatusCode::kNotFound);
  EXPECT_EQ(StatusCodeForHttp(409), StatusCode::kAborted);
  EXPECT_EQ(StatusCodeForHttp(410), StatusCode::kExpired);
  EXPECT_EQ(StatusCodeForHttp(422), StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusCodeForHttp(429), StatusCode::kResourceExhausted);
  EXPECT_EQ(StatusCodeForHttp(500), StatusCode::kInternal);
  EXPECT_EQ(StatusCodeForHttp(503), StatusCode::kUnavailable);
  EXPECT_EQ(StatusCodeForHttp(504), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(StatusCodeForHttp(418), StatusCode::kUnknown);
  EXPECT_STREQ(StatusCodeName(StatusCode::kExpired), "EXPIRED");
  EXPECT_EQ(Aborted("conflict").ToString(), "ABORTED: conflict");
}

TEST(StatusOr, MovesTheValueOutOfATemporary) {
  auto make = []() -> StatusOr<std::unique_ptr<int>> { return std::make_unique<int>(5); };
  std::unique_ptr<int> p = *make();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 5);
}

}  // namespace
}  // namespace hypertrain
