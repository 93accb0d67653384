#include "lib/common/code_pages.h"

#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace dra {
namespace {

// Resident KiB of this process's executable mappings of its own binary ("r-xp" lines of
// /proc/self/smaps whose path is /proc/self/exe's target).
long ExecutableTextRssKiB() {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return -1;
  exe[n] = '\0';
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool in_text = false;
  long total = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find('-') < line.find(' ')) {
      in_text = line.find(" r-xp ") != std::string::npos && line.size() >= static_cast<size_t>(n) &&
                line.compare(line.size() - n, n, exe) == 0;
    } else if (in_text && line.rfind("Rss:", 0) == 0) {
      total += std::strtol(line.c_str() + 4, nullptr, 10);
    }
  }
  return total;
}

// Data the loader writes (relocated pointers in RELRO, a vtable) and data the program writes
// must survive the release: only never-written pages are dropped.
struct Base {
  virtual ~Base() = default;
  virtual int Value() const { return 1; }
};
struct Derived : Base {
  int Value() const override { return 42; }
};
const char* const kTable[] = {"alpha", "beta", "gamma"};  // relocated pointers (RELRO in PIE)
int g_counter = 0;

int ValueOf(const Base& b) { return b.Value(); }

TEST(CodePagesTest, ReleasesTextAndKeepsWrittenData) {
  g_counter = 7;
  Derived d;
  ASSERT_EQ(ValueOf(d), 42);
  const long before = ExecutableTextRssKiB();
  ASSERT_GT(before, 0);

  absl::StatusOr<ReleasedCode> released = ReleaseCleanCodePages();
  ASSERT_TRUE(released.ok()) << released.status();
  // The executable and at least libc and libstdc++.
  EXPECT_GE(released->objects, 3);
  EXPECT_GE(released->ranges, released->objects);
  EXPECT_GT(released->bytes, 0);

  // Read before anything else runs much code: only what this function needs faults back in.
  const long after = ExecutableTextRssKiB();
  EXPECT_LT(after, before) << "text RSS before " << before << " KiB, after " << after << " KiB";

  // Everything still works and holds its values.
  EXPECT_EQ(ValueOf(d), 42);
  EXPECT_EQ(g_counter, 7);
  EXPECT_STREQ(kTable[0], "alpha");
  EXPECT_STREQ(kTable[2], "gamma");
  std::string s(1000, 'x');
  EXPECT_EQ(std::strlen(s.c_str()), 1000u);
}

TEST(CodePagesTest, RepeatedReleaseIsHarmless) {
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<ReleasedCode> released = ReleaseCleanCodePages();
    ASSERT_TRUE(released.ok()) << released.status();
    EXPECT_GT(released->bytes, 0);
  }
  Derived d;
  EXPECT_EQ(ValueOf(d), 42);
}

TEST(CodePagesTest, TracerPidIsReadFromTheStatusText) {
  EXPECT_EQ(internal::TracerPid("Name:\tx\nState:\tR\nTracerPid:\t0\nUid:\t0\n"), 0);
  EXPECT_EQ(internal::TracerPid("Name:\tx\nTracerPid:\t4242\nUid:\t0\n"), 4242);
  EXPECT_EQ(internal::TracerPid("Name:\tx\nTracerPid:\t77"), 77);
  EXPECT_EQ(internal::TracerPid("Name:\tx\n"), 0);
  EXPECT_EQ(internal::TracerPid("Name:\tx\nTracerPid:\tnope\n"), 0);
}

// Under a tracer (here the parent, through PTRACE_TRACEME) nothing is released, so that a
// debugger's breakpoints stay.
TEST(CodePagesTest, NothingIsReleasedWhileTraced) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) _exit(3);
    absl::StatusOr<ReleasedCode> released = ReleaseCleanCodePages();
    _exit(!released.ok() ? 2 : released->traced && released->bytes == 0 ? 0 : 1);
  }
  int status = 0;
  while (waitpid(child, &status, 0) == child && WIFSTOPPED(status)) {
    ptrace(PTRACE_CONT, child, nullptr, nullptr);
  }
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "ptrace(PTRACE_TRACEME) is not permitted here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: released under a tracer, 2: error";
}

TEST(CodePagesTest, ReleasesWhenNotTraced) {
  absl::StatusOr<ReleasedCode> released = ReleaseCleanCodePages();
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_FALSE(released->traced);
}

}  // namespace
}  // namespace dra
