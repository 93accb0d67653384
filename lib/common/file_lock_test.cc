#include "lib/common/file_lock.h"

#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra {
namespace {

using ::testing::HasSubstr;

class FileLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/file_lock_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/pu.lock";
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::string dir_;
  std::string path_;
};

TEST_F(FileLockTest, CreatesFileAndExcludesSecondHolder) {
  absl::StatusOr<FileLock> first = FileLock::Acquire(path_, absl::ZeroDuration());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->held());
  EXPECT_EQ(first->path(), path_);
  struct stat st;
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  const mode_t umask = ::umask(022);
  ::umask(umask);
  EXPECT_EQ(st.st_mode & 0777, 0644 & ~umask);

  for (absl::Duration timeout : {absl::ZeroDuration(), absl::Milliseconds(30)}) {
    absl::StatusOr<FileLock> second = FileLock::Acquire(path_, timeout, absl::Milliseconds(5));
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(second.status().message(), HasSubstr("acquiring lock " + path_));
  }

  first->Release();
  EXPECT_FALSE(first->held());
  first->Release();  // idempotent
  EXPECT_TRUE(FileLock::Acquire(path_, absl::ZeroDuration()).ok());
}

TEST_F(FileLockTest, DestructorAndMoveRelease) {
  {
    absl::StatusOr<FileLock> lock = FileLock::Acquire(path_, absl::ZeroDuration());
    ASSERT_TRUE(lock.ok());
    FileLock moved = *std::move(lock);
    EXPECT_TRUE(moved.held());
    EXPECT_FALSE(lock->held());  // NOLINT(bugprone-use-after-move): moved-from is empty
    // Still held through `moved`.
    EXPECT_FALSE(FileLock::Acquire(path_, absl::ZeroDuration()).ok());

    absl::StatusOr<FileLock> other = FileLock::Acquire(dir_ + "/other.lock", absl::ZeroDuration());
    ASSERT_TRUE(other.ok());
    moved = *std::move(other);  // releases pu.lock, takes over other.lock
    EXPECT_TRUE(FileLock::Acquire(path_, absl::ZeroDuration()).ok());
    EXPECT_FALSE(FileLock::Acquire(dir_ + "/other.lock", absl::ZeroDuration()).ok());
  }
  // Both released by destructors.
  EXPECT_TRUE(FileLock::Acquire(path_, absl::ZeroDuration()).ok());
  EXPECT_TRUE(FileLock::Acquire(dir_ + "/other.lock", absl::ZeroDuration()).ok());
}

TEST_F(FileLockTest, MissingDirectoryNamesPath) {
  const std::string path = dir_ + "/missing/x.lock";
  absl::StatusOr<FileLock> lock = FileLock::Acquire(path, absl::Seconds(1));
  EXPECT_EQ(lock.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(lock.status().message(), HasSubstr("open lock file " + path));
}

TEST_F(FileLockTest, WaiterGetsLockWhenThreadReleases) {
  absl::StatusOr<FileLock> holder = FileLock::Acquire(path_, absl::ZeroDuration());
  ASSERT_TRUE(holder.ok());
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    absl::StatusOr<FileLock> lock =
        FileLock::Acquire(path_, absl::InfiniteDuration(), absl::Milliseconds(2));
    EXPECT_TRUE(lock.ok()) << lock.status();
    acquired = true;
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(acquired.load());
  holder->Release();
  waiter.join();
  EXPECT_TRUE(acquired.load());
}

// Waits up to `timeout` for a byte on `fd`; returns it or -1.
int ReadByte(int fd, absl::Duration timeout) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) != 1) return -1;
  char c;
  return ::read(fd, &c, 1) == 1 ? c : -1;
}

TEST_F(FileLockTest, ContendsAcrossProcesses) {
  absl::StatusOr<FileLock> parent_lock = FileLock::Acquire(path_, absl::ZeroDuration());
  ASSERT_TRUE(parent_lock.ok());
  int to_parent[2];
  ASSERT_EQ(::pipe(to_parent), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(to_parent[0]);
    // The fd inherited through fork shares the parent's lock; drop it without unlocking.
    parent_lock->Release();  // closes only the child's copy: the parent still holds the lock
    absl::StatusOr<FileLock> busy =
        FileLock::Acquire(path_, absl::Milliseconds(30), absl::Milliseconds(5));
    char report =
        (!busy.ok() && busy.status().code() == absl::StatusCode::kDeadlineExceeded) ? 'B' : 'x';
    if (::write(to_parent[1], &report, 1) != 1) ::_exit(3);
    absl::StatusOr<FileLock> later =
        FileLock::Acquire(path_, absl::Seconds(30), absl::Milliseconds(5));
    report = later.ok() ? 'A' : 'y';
    if (::write(to_parent[1], &report, 1) != 1) ::_exit(3);
    ::_exit(later.ok() ? 0 : 1);
  }
  ::close(to_parent[1]);
  EXPECT_EQ(ReadByte(to_parent[0], absl::Seconds(30)), 'B') << "child got a held lock";
  // The child is now waiting; it must not get the lock while we hold it.
  EXPECT_EQ(ReadByte(to_parent[0], absl::Milliseconds(100)), -1);
  parent_lock->Release();
  EXPECT_EQ(ReadByte(to_parent[0], absl::Seconds(30)), 'A');
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ::close(to_parent[0]);
}

// A waiter that opened the lock file before it was replaced must not "win" a lock on the orphaned
// inode while someone holds the file now at the path.
TEST_F(FileLockTest, LockOnReplacedFileIsRetried) {
  absl::StatusOr<FileLock> old_holder = FileLock::Acquire(path_, absl::ZeroDuration());
  ASSERT_TRUE(old_holder.ok());
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    absl::StatusOr<FileLock> lock =
        FileLock::Acquire(path_, absl::InfiniteDuration(), absl::Milliseconds(2));
    EXPECT_TRUE(lock.ok()) << lock.status();
    acquired = true;
  });
  absl::SleepFor(absl::Milliseconds(30));  // let the waiter open the old inode
  ASSERT_EQ(::unlink(path_.c_str()), 0);
  absl::StatusOr<FileLock> new_holder = FileLock::Acquire(path_, absl::ZeroDuration());
  ASSERT_TRUE(new_holder.ok()) << "a new file at the path is a new lock";
  old_holder->Release();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(acquired.load()) << "waiter took the orphaned inode's lock";
  new_holder->Release();
  waiter.join();
  EXPECT_TRUE(acquired.load());
}

}  // namespace
}  // namespace dra
