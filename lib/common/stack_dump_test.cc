#include "lib/common/stack_dump.h"

#include <thread>

#include "absl/base/attributes.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/atomic_file.h"

namespace dra {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

// Not inlined, and not a tail call (the barrier after the wait), so that it has a frame of its
// own on the blocked thread's stack.
ABSL_ATTRIBUTE_NOINLINE void BlockedInAKnownFunction(absl::Notification* started,
                                                     absl::Notification* stop) {
  started->Notify();
  stop->WaitForNotification();
  asm volatile("" ::: "memory");
}

TEST(StackDumpTest, EveryThreadReportsItsStack) {
  InitializeStackDumpSymbolizer("/proc/self/exe");
  InstallStackDumpHandler();
  absl::Notification stop;
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&stop] { stop.WaitForNotification(); });
  }
  std::string path = ::testing::TempDir() + "/stacks.dump";
  int dumped = 0;
  ASSERT_TRUE(DumpAllThreadStacks(path, &dumped).ok());
  stop.Notify();
  for (auto& t : threads) t.join();
  EXPECT_GE(dumped, 4);  // the main thread and the three waiters
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, ::testing::HasSubstr("threads answered"));
  EXPECT_THAT(*text, ::testing::HasSubstr("thread "));
  EXPECT_THAT(*text, ::testing::HasSubstr("#0 "));
}

// Frames name their functions (demangled), with the module offset after them.
TEST(StackDumpTest, FramesNameTheirFunctions) {
  InitializeStackDumpSymbolizer("/proc/self/exe");
  InstallStackDumpHandler();
  absl::Notification started, stop;
  std::thread blocked(BlockedInAKnownFunction, &started, &stop);
  started.WaitForNotification();
  std::string path = ::testing::TempDir() + "/named-stacks.dump";
  absl::Status dumped = DumpAllThreadStacks(path);
  stop.Notify();
  blocked.join();
  ASSERT_TRUE(dumped.ok()) << dumped;
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, ContainsRegex(R"(  #[0-9]+ 0x[0-9a-f]+ )"
                                   R"(dra::\(anonymous namespace\)::BlockedInAKnownFunction\(\) )"
                                   R"(\(common_stack_dump_test\+0x[0-9a-f]+\))"))
      << *text;
  // The dumping thread itself is named too.
  EXPECT_THAT(*text, HasSubstr("dra::DumpAllThreadStacks("));
}

}  // namespace
}  // namespace dra
