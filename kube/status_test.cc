#include "kube/status.h"

#include <gtest/gtest.h>

namespace kube {
namespace {

TEST(KubeStatusTest, MapsStatusBodies) {
  Status nf = ErrorFromStatus(
      404, R"({"kind":"Status","code":404,"reason":"NotFound","message":"pods \"x\" not found"})");
  EXPECT_TRUE(IsNotFound(nf));
  EXPECT_EQ(nf.message(), "pods \"x\" not found");
  EXPECT_EQ(nf.ToString(), "NotFound (404): pods \"x\" not found");
  EXPECT_EQ(Reason(nf), "NotFound");

  EXPECT_TRUE(IsAlreadyExists(ErrorFromStatus(409, R"({"kind":"Status","reason":"AlreadyExists"})")));
  EXPECT_TRUE(IsConflict(ErrorFromStatus(409, R"({"kind":"Status","reason":"Conflict"})")));
  EXPECT_TRUE(IsConflict(ErrorFromStatus(409, "no body")));
  EXPECT_TRUE(IsGone(ErrorFromStatus(410, R"({"kind":"Status","reason":"Expired"})")));
  Status inv = ErrorFromStatus(422, R"({"kind":"Status","reason":"Invalid","message":"bad"})");
  EXPECT_TRUE(IsInvalid(inv));
  EXPECT_EQ(inv.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(IsInvalid(ErrorFromStatus(400, "{}")));
}

TEST(KubeStatusTest, KeepsRetryAfterAndTheTransportStatus) {
  Status s = ErrorFromStatus(
      429, R"({"kind":"Status","code":500,"reason":"TooManyRequests","details":{"retryAfterSeconds":7}})");
  ASSERT_NE(s.api_detail(), nullptr);
  EXPECT_EQ(s.api_detail()->retry_after_seconds, 7);
  EXPECT_EQ(s.http_status(), 429);  // the transport status wins over Status.code
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
}

TEST(KubeStatusTest, UnparseableBodiesAreTruncated) {
  Status s = ErrorFromStatus(503, std::string(2000, 'x'));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(Reason(s), "ServerError");
  EXPECT_EQ(s.message().size(), 515u);
  Status w = ErrorFromStatusObject(0, Json{{"code", 410}, {"reason", "Gone"}, {"message", "old"}});
  EXPECT_TRUE(IsGone(w));
  EXPECT_EQ(w.ToString(), "Gone (410): old");
}

}  // namespace
}  // namespace kube
