#include "lib/k8s/errors.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::k8s {
namespace {

using ::testing::HasSubstr;

struct Case {
  long code;
  std::string body;
  absl::StatusCode want_code;
  std::string want_reason;
};

TEST(StatusFromHttpTest, MapsCodesAndReasons) {
  const Case cases[] = {
      {404,
       R"({"kind":"Status","status":"Failure","message":"resourceslices.resource.k8s.io \"x\" not found","reason":"NotFound","code":404})",
       absl::StatusCode::kNotFound, "NotFound"},
      {409, R"({"kind":"Status","message":"already there","reason":"AlreadyExists","code":409})",
       absl::StatusCode::kAlreadyExists, "AlreadyExists"},
      {409, R"({"kind":"Status","message":"modified","reason":"Conflict","code":409})",
       absl::StatusCode::kAborted, "Conflict"},
      {410, R"({"kind":"Status","message":"too old resource version","reason":"Expired"})",
       absl::StatusCode::kOutOfRange, "Expired"},
      {403, R"({"kind":"Status","message":"forbidden: User \"u\"","reason":"Forbidden"})",
       absl::StatusCode::kPermissionDenied, "Forbidden"},
      {401, "Unauthorized\n", absl::StatusCode::kUnauthenticated, "Unauthorized"},
      {422, R"({"kind":"Status","message":"spec.driver: Required value","reason":"Invalid"})",
       absl::StatusCode::kInvalidArgument, "Invalid"},
      {429, R"({"kind":"Status","message":"slow down","reason":"TooManyRequests"})",
       absl::StatusCode::kResourceExhausted, "TooManyRequests"},
      {503, "", absl::StatusCode::kUnavailable, "ServiceUnavailable"},
      {504, R"({"kind":"Status","message":"Too large resource version","reason":"Timeout"})",
       absl::StatusCode::kDeadlineExceeded, "Timeout"},
  };
  for (const Case& c : cases) {
    absl::Status s = StatusFromHttp(c.code, c.body, "", "get x");
    EXPECT_EQ(s.code(), c.want_code) << c.code << " " << c.body;
    EXPECT_EQ(Reason(s), c.want_reason) << c.code;
    EXPECT_THAT(s.message(), HasSubstr("get x: ")) << s;
    EXPECT_EQ(std::string(s.message()).find('\n'), std::string::npos) << s;
  }
}

TEST(StatusFromHttpTest, PredicatesFollowReasons) {
  EXPECT_TRUE(absl::IsNotFound(StatusFromHttp(404, "", "", "x")));
  EXPECT_TRUE(IsConflict(StatusFromHttp(409, "", "", "x")));
  EXPECT_FALSE(absl::IsAlreadyExists(StatusFromHttp(409, "", "", "x")));
  EXPECT_TRUE(IsGone(StatusFromHttp(410, "", "", "x")));
  EXPECT_TRUE(IsForbidden(StatusFromHttp(403, "", "", "x")));
  EXPECT_TRUE(IsUnauthorized(StatusFromHttp(401, "", "", "x")));
  EXPECT_TRUE(IsTooManyRequests(StatusFromHttp(429, "", "", "x")));
  EXPECT_TRUE(IsInvalid(StatusFromHttp(422, "", "", "x")));
  EXPECT_EQ(Reason(absl::NotFoundError("plain absl error without a reason")), "");
}

TEST(StatusFromHttpTest, RetryAfterFromHeaderOrDetails) {
  EXPECT_EQ(RetryAfter(StatusFromHttp(429, "", "7", "x")), absl::Seconds(7));
  EXPECT_EQ(
      RetryAfter(StatusFromHttp(
          429, R"({"kind":"Status","reason":"TooManyRequests","details":{"retryAfterSeconds":3}})",
          "", "x")),
      absl::Seconds(3));
  EXPECT_EQ(RetryAfter(StatusFromHttp(429, "", "", "x")), absl::ZeroDuration());
  EXPECT_EQ(RetryAfter(StatusFromHttp(429, "", "soon", "x")), absl::ZeroDuration());
}

TEST(StatusFromHttpTest, ServerMessageIsKept) {
  absl::Status s = StatusFromHttp(
      403,
      R"({"kind":"Status","message":"resourceslices.resource.k8s.io is forbidden: User \"bob\" cannot list resource \"resourceslices\"","reason":"Forbidden","code":403})",
      "", "list resourceslices.resource.k8s.io");
  EXPECT_EQ(s.message(),
            "list resourceslices.resource.k8s.io: resourceslices.resource.k8s.io is forbidden: "
            "User \"bob\" cannot list resource \"resourceslices\" (Forbidden)");
}

}  // namespace
}  // namespace dra::k8s
