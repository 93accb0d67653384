#include "lib/kubeletplugin/serializer.h"

#include <sys/stat.h>

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/kubeletplugin/test_util.h"

namespace dra::kubeletplugin {
namespace {

using ::testing::HasSubstr;

TEST(SerializerTest, SecondAcquireWaitsUntilReleaseOrDeadline) {
  auto serializer = Serializer::Create("");
  ASSERT_TRUE(serializer.ok()) << serializer.status();
  std::optional<Serializer::Guard> first;
  {
    auto guard = (*serializer)->Acquire(absl::Now() + absl::Seconds(1));
    ASSERT_TRUE(guard.ok()) << guard.status();
    first.emplace(*std::move(guard));
  }
  auto blocked = (*serializer)->Acquire(absl::Now() + absl::Milliseconds(50));
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kDeadlineExceeded);

  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(50));
    first.reset();
  });
  auto second = (*serializer)->Acquire(absl::Now() + absl::Seconds(10));
  EXPECT_TRUE(second.ok()) << second.status();
  releaser.join();
}

TEST(SerializerTest, LockFileExcludesOtherSerializers) {
  testing::TempTree tree;
  const std::string path = tree.root() + "/serialize.lock";
  const mode_t old_umask = ::umask(0);
  auto a = Serializer::Create(path);
  ::umask(old_umask);
  ASSERT_TRUE(a.ok()) << a.status();
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  auto b = Serializer::Create(path);
  ASSERT_TRUE(b.ok()) << b.status();

  {
    auto held = (*a)->Acquire(absl::Now() + absl::Seconds(1));
    ASSERT_TRUE(held.ok()) << held.status();
    auto blocked = (*b)->Acquire(absl::Now() + absl::Milliseconds(100));
    EXPECT_EQ(blocked.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(blocked.status().message(), HasSubstr("serialize with other plugin instances"));
  }
  auto free = (*b)->Acquire(absl::Now() + absl::Seconds(1));
  EXPECT_TRUE(free.ok()) << free.status();
}

TEST(SerializerTest, LockFileInMissingDirectoryFails) {
  auto serializer = Serializer::Create("/nonexistent-dir/serialize.lock");
  EXPECT_FALSE(serializer.ok());
  EXPECT_THAT(serializer.status().message(), HasSubstr("create lock file"));
}

}  // namespace
}  // namespace dra::kubeletplugin
