#include "lib/common/stack_dump.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/atomic_file.h"

namespace dra {
namespace {

TEST(StackDumpTest, EveryThreadReportsItsStack) {
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

}  // namespace
}  // namespace dra
