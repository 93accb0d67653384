#include "lib/common/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <ostream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::log {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::SizeIs;

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetVerbosity(0);
    SetSink([this](std::string_view line) {
      absl::MutexLock lock(&mu_);
      lines_.emplace_back(line);
    });
  }
  void TearDown() override {
    SetSink(nullptr);
    SetVerbosity(0);
  }
  std::vector<std::string> Lines() {
    absl::MutexLock lock(&mu_);
    return lines_;
  }
  // The part after "] ", without the newline.
  std::string LastBody() {
    std::vector<std::string> lines = Lines();
    if (lines.empty()) return "<none>";
    const std::string& line = lines.back();
    size_t start = line.find("] ");
    return line.substr(start + 2, line.size() - start - 3);
  }

  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

// klog: Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg
const std::regex kHeader(
    R"(^([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) ( *\d+) ([^ :]+):(\d+)\] (.*)\n$)");

TEST_F(LogTest, HeaderMatchesKlogFormat) {
  const absl::Time before = absl::Now();
  const int line = __LINE__ + 1;
  DRA_INFO("hello", "k", "v");
  ASSERT_THAT(Lines(), SizeIs(1));
  std::smatch m;
  const std::string text = Lines()[0];
  ASSERT_TRUE(std::regex_match(text, m, kHeader)) << text;
  EXPECT_EQ(m[1], "I");
  EXPECT_EQ(m[9], "log_test.cc");  // base name only
  EXPECT_EQ(m[10], std::to_string(line));
  EXPECT_EQ(m[11], "\"hello\" k=\"v\"");
  // Thread id, right-aligned in 7 columns like klog's %7d.
  const std::string tid = m[8];
  EXPECT_EQ(tid.size(), std::max<size_t>(7, std::to_string(::syscall(SYS_gettid)).size()));
  int parsed_tid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(tid, &parsed_tid));
  EXPECT_EQ(parsed_tid, ::syscall(SYS_gettid));
  // The time stamp is UTC now.
  const absl::CivilSecond now = absl::ToCivilSecond(before, absl::UTCTimeZone());
  const absl::CivilSecond logged(now.year(), std::stoi(m[2]), std::stoi(m[3]), std::stoi(m[4]),
                                 std::stoi(m[5]), std::stoi(m[6]));
  EXPECT_LE(std::abs(logged - now), 5) << text;
}

TEST_F(LogTest, SeverityLetters) {
  DRA_INFO("i");
  DRA_WARNING("w");
  DRA_ERROR("e");
  DRA_VLOG(0, "v");
  std::vector<std::string> lines = Lines();
  ASSERT_THAT(lines, SizeIs(4));
  EXPECT_EQ(lines[0][0], 'I');
  EXPECT_EQ(lines[1][0], 'W');
  EXPECT_EQ(lines[2][0], 'E');
  EXPECT_EQ(lines[3][0], 'I');  // V-levels are info lines, as in klog
}

TEST_F(LogTest, MessageWithoutPairsEndsAfterQuote) {
  DRA_INFO("just a message");
  ASSERT_THAT(Lines(), SizeIs(1));
  EXPECT_THAT(Lines()[0], EndsWith("] \"just a message\"\n"));
}

struct EscapeCase {
  std::string in;
  std::string quoted;
};

class LogEscapeTest : public LogTest, public ::testing::WithParamInterface<EscapeCase> {};

TEST_P(LogEscapeTest, QuotesMessageAndValues) {
  const EscapeCase& c = GetParam();
  DRA_INFO(c.in, "k", c.in);
  EXPECT_EQ(LastBody(), c.quoted + " k=" + c.quoted);
  // Whatever the input, a record is exactly one line.
  ASSERT_THAT(Lines(), SizeIs(1));
  EXPECT_EQ(Lines()[0].find('\n'), Lines()[0].size() - 1);
}

INSTANTIATE_TEST_SUITE_P(Table, LogEscapeTest,
                         ::testing::Values(EscapeCase{"plain", R"("plain")"},
                                           EscapeCase{"", R"("")"},
                                           EscapeCase{"say \"hi\"", R"("say \"hi\"")"},
                                           EscapeCase{"C:\\dir", R"("C:\\dir")"},
                                           EscapeCase{"two\nlines", R"("two\nlines")"},
                                           EscapeCase{"tab\there", R"("tab\there")"},
                                           EscapeCase{"cr\r", R"("cr\r")"},
                                           EscapeCase{std::string("nul\0x", 5), R"("nul\x00x")"},
                                           EscapeCase{"bell\x07", R"("bell\x07")"},
                                           EscapeCase{"del\x7f", R"("del\x7f")"},
                                           EscapeCase{"caf\xc3\xa9", "\"caf\xc3\xa9\""}));

enum class Color { kRed = 3 };

struct Point {
  int x, y;
};
std::ostream& operator<<(std::ostream& os, const Point& p) { return os << p.x << "," << p.y; }

TEST_F(LogTest, FormatsEachValueType) {
  const std::string str = "s";
  const std::string_view std_view = "sv";
  const absl::string_view absl_view = "av";
  const char* null_cstr = nullptr;
  DRA_INFO("m", "int", 42, "neg", int64_t{-7}, "u64", std::numeric_limits<uint64_t>::max(),
           "double", 1.5, "t", true, "f", false, "str", str, "sv", std_view, "av", absl_view,
           "cstr", "lit", "null", null_cstr, "char", 'x', "ok", absl::OkStatus(), "err",
           absl::NotFoundError("claim \"a\" gone"), "dur", absl::Milliseconds(1500), "enum",
           Color::kRed, "point", Point{1, 2});
  EXPECT_EQ(LastBody(),
            R"("m" int=42 neg=-7 u64=18446744073709551615 double=1.5 t=true f=false str="s" )"
            R"(sv="sv" av="av" cstr="lit" null="" char="x" ok="ok" err="claim \"a\" gone" )"
            R"(dur="1.5s" enum=3 point="1,2")");
}

TEST_F(LogTest, VerbosityGatesVlog) {
  struct Case {
    int verbosity;
    int level;
    bool written;
  };
  for (const Case& c : {Case{0, 0, true}, Case{0, 1, false}, Case{2, 2, true}, Case{2, 3, false},
                        Case{5, 1, true}}) {
    SetVerbosity(c.verbosity);
    const size_t before = Lines().size();
    DRA_VLOG(c.level, "v");
    EXPECT_EQ(Lines().size() - before, c.written ? 1u : 0u)
        << "verbosity " << c.verbosity << " level " << c.level;
    EXPECT_EQ(VEnabled(c.level), c.written);
  }
  EXPECT_EQ(Verbosity(), 5);
}

TEST_F(LogTest, DisabledVlogDoesNotEvaluateArguments) {
  SetVerbosity(1);
  int evaluated = 0;
  auto value = [&evaluated] {
    ++evaluated;
    return 1;
  };
  DRA_VLOG(2, "skipped", "k", value());
  EXPECT_EQ(evaluated, 0);
  DRA_VLOG(1, "written", "k", value());
  EXPECT_EQ(evaluated, 1);
}

TEST_F(LogTest, LinesFromThreadsStayWhole) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) DRA_INFO("from thread", "t", t, "i", i);
    });
  }
  for (auto& thread : threads) thread.join();
  std::vector<std::string> lines = Lines();
  ASSERT_THAT(lines, SizeIs(800));
  for (const std::string& line : lines) {
    ASSERT_TRUE(std::regex_match(line, kHeader)) << line;
    ASSERT_THAT(line, HasSubstr("] \"from thread\" t="));
  }
}

TEST_F(LogTest, DefaultSinkIsStderr) {
  SetSink(nullptr);
  ::testing::internal::CaptureStderr();
  DRA_WARNING("to stderr", "n", 1);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(std::regex_match(err, kHeader)) << err;
  EXPECT_THAT(err, EndsWith("] \"to stderr\" n=1\n"));
}

}  // namespace
}  // namespace dra::log
