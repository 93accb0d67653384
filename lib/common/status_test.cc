#include "lib/common/status.h"

#include <cerrno>
#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/cord.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra {
namespace {

using ::testing::HasSubstr;

TEST(AnnotateTest, PrependsContextAndKeepsCode) {
  absl::Status s = Annotate(absl::NotFoundError("no such claim"), "prepare claim ns/a");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "prepare claim ns/a: no such claim");
}

TEST(AnnotateTest, NestsOuterContextFirst) {
  absl::Status s = Annotate(Annotate(absl::InternalError("disk full"), "inner"), "outer");
  EXPECT_EQ(s.message(), "outer: inner: disk full");
}

TEST(AnnotateTest, OkStaysOk) { EXPECT_TRUE(Annotate(absl::OkStatus(), "context").ok()); }

TEST(AnnotateTest, KeepsPayloads) {
  absl::Status in = absl::UnavailableError("down");
  in.SetPayload("type.example/retry", absl::Cord("5s"));
  absl::Status out = Annotate(in, "call");
  ASSERT_TRUE(out.GetPayload("type.example/retry").has_value());
  EXPECT_EQ(std::string(*out.GetPayload("type.example/retry")), "5s");
}

TEST(AnnotateTest, AcceptsEveryStringType) {
  const absl::Status base = absl::AbortedError("x");
  std::string str = "s";
  std::string_view std_view = "v";
  absl::string_view absl_view = "a";
  EXPECT_EQ(Annotate(base, str).message(), "s: x");
  EXPECT_EQ(Annotate(base, std_view).message(), "v: x");
  EXPECT_EQ(Annotate(base, absl_view).message(), "a: x");
  EXPECT_EQ(Annotate(base, "lit").message(), "lit: x");
}

struct ErrnoCase {
  int errno_value;
  absl::StatusCode code;
  std::string message;
};

class ErrnoToStatusTest : public ::testing::TestWithParam<ErrnoCase> {};

TEST_P(ErrnoToStatusTest, MapsCodeAndLowerCasesMessage) {
  const ErrnoCase& c = GetParam();
  absl::Status s = ErrnoToStatus(c.errno_value, "open /x");
  EXPECT_EQ(s.code(), c.code);
  EXPECT_EQ(s.message(), c.message);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ErrnoToStatusTest,
    ::testing::Values(
        ErrnoCase{ENOENT, absl::StatusCode::kNotFound, "open /x: no such file or directory"},
        ErrnoCase{EACCES, absl::StatusCode::kPermissionDenied, "open /x: permission denied"},
        ErrnoCase{EEXIST, absl::StatusCode::kAlreadyExists, "open /x: file exists"},
        ErrnoCase{ETIMEDOUT, absl::StatusCode::kDeadlineExceeded, "open /x: connection timed out"},
        ErrnoCase{ENOSPC, absl::StatusCode::kResourceExhausted, "open /x: no space left on device"},
        ErrnoCase{EINVAL, absl::StatusCode::kInvalidArgument, "open /x: invalid argument"}));

TEST(ErrnoToStatusTest, EmptyContextGivesBareReason) {
  EXPECT_EQ(ErrnoToStatus(ENOENT, "").message(), "no such file or directory");
}

TEST(ErrnoToStatusTest, AcceptsStdStringView) {
  std::string_view context = "stat /y";
  EXPECT_EQ(ErrnoToStatus(ENOENT, context).message(), "stat /y: no such file or directory");
}

// --- RETURN_IF_ERROR / ASSIGN_OR_RETURN ---

int g_calls = 0;

absl::Status CountedStatus(absl::Status s) {
  ++g_calls;
  return s;
}

absl::Status ReturnIfErrorUser(const absl::Status& first, bool* reached_end) {
  RETURN_IF_ERROR(CountedStatus(first));
  *reached_end = true;
  return absl::OkStatus();
}

TEST(ReturnIfErrorTest, PropagatesErrorAndEvaluatesOnce) {
  g_calls = 0;
  bool reached_end = false;
  absl::Status s = ReturnIfErrorUser(absl::DataLossError("torn"), &reached_end);
  EXPECT_EQ(s, absl::DataLossError("torn"));
  EXPECT_FALSE(reached_end);
  EXPECT_EQ(g_calls, 1);
}

TEST(ReturnIfErrorTest, ContinuesOnOk) {
  g_calls = 0;
  bool reached_end = false;
  EXPECT_TRUE(ReturnIfErrorUser(absl::OkStatus(), &reached_end).ok());
  EXPECT_TRUE(reached_end);
  EXPECT_EQ(g_calls, 1);
}

absl::StatusOr<int> ReturnIfErrorInStatusOr(const absl::Status& s) {
  RETURN_IF_ERROR(s);
  return 7;
}

TEST(ReturnIfErrorTest, WorksInStatusOrFunction) {
  EXPECT_EQ(*ReturnIfErrorInStatusOr(absl::OkStatus()), 7);
  EXPECT_EQ(ReturnIfErrorInStatusOr(absl::CancelledError("stop")).status(),
            absl::CancelledError("stop"));
}

absl::StatusOr<std::unique_ptr<int>> MakeInt(absl::StatusOr<int> v) {
  if (!v.ok()) return v.status();
  return std::make_unique<int>(*v);
}

absl::StatusOr<int> SumTwo(const absl::StatusOr<int>& a, const absl::StatusOr<int>& b) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> pa, MakeInt(a));  // declaration, move-only type
  int sum = 0;
  ASSIGN_OR_RETURN(sum, b);  // existing lvalue
  return *pa + sum;
}

TEST(AssignOrReturnTest, AssignsDeclarationsAndLvalues) { EXPECT_EQ(*SumTwo(2, 3), 5); }

TEST(AssignOrReturnTest, PropagatesFirstError) {
  EXPECT_EQ(SumTwo(absl::NotFoundError("a"), absl::NotFoundError("b")).status().message(), "a");
  EXPECT_EQ(SumTwo(1, absl::NotFoundError("b")).status().message(), "b");
}

absl::Status AssignOrReturnInStatusFunction(absl::StatusOr<std::string> in, std::string* out) {
  ASSIGN_OR_RETURN(*out, std::move(in));
  return absl::OkStatus();
}

TEST(AssignOrReturnTest, WorksInStatusFunction) {
  std::string out;
  EXPECT_TRUE(AssignOrReturnInStatusFunction(std::string("v"), &out).ok());
  EXPECT_EQ(out, "v");
  EXPECT_THAT(AssignOrReturnInStatusFunction(absl::InternalError("bad"), &out).message(),
              HasSubstr("bad"));
}

}  // namespace
}  // namespace dra
