#include "lib/common/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/atomic_file_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::vector<std::string> Entries(const std::string& dir) {
    std::vector<std::string> out;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return out;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    ::closedir(d);
    return out;
  }
  mode_t Mode(const std::string& path) {
    struct stat st;
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }

  std::string dir_;
};

TEST_F(AtomicFileTest, WritesNewFileWithMode) {
  struct Case {
    std::string name;
    std::string contents;
    mode_t mode;
  };
  const mode_t old_umask = ::umask(077);  // the mode must not depend on the umask
  for (const Case& c :
       {Case{"a.json", "{\"v\":1}\n", 0644}, Case{"empty", "", 0600},
        Case{"exec", "#!/bin/sh\n", 0755}, Case{"binary", std::string("\0\1\2\xff", 4), 0640},
        Case{"large", std::string(1 << 20, 'x'), 0644}}) {
    const std::string path = dir_ + "/" + c.name;
    ASSERT_TRUE(WriteFileAtomically(path, c.contents, c.mode).ok()) << c.name;
    absl::StatusOr<std::string> read = ReadFile(path);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(*read, c.contents) << c.name;
    EXPECT_EQ(Mode(path), c.mode) << c.name;
  }
  ::umask(old_umask);
  EXPECT_THAT(Entries(dir_), UnorderedElementsAre("a.json", "empty", "exec", "binary", "large"));
}

TEST_F(AtomicFileTest, ReplacedFileIsReleasedInTheBackground) {
  const std::string path = dir_ + "/checkpoint.json";
  AtomicWriteOptions options{
      .mode = 0600, .release_replaced_in_background = true, .durable = false};
  ASSERT_TRUE(WriteFileAtomically(path, "one", options).ok());  // nothing to replace yet
  // A reader holding the old file keeps reading the old contents.
  int old_fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(old_fd, 0);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(WriteFileAtomically(path, "v" + std::to_string(i), options).ok());
  }
  char buf[8] = {};
  EXPECT_EQ(::read(old_fd, buf, sizeof(buf)), 3);
  EXPECT_STREQ(buf, "one");
  ::close(old_fd);
  EXPECT_EQ(*ReadFile(path), "v19");
  WaitForBackgroundUnlinks();
  // Only the file itself remains: the kept links of the replaced versions are gone.
  EXPECT_THAT(Entries(dir_), UnorderedElementsAre("checkpoint.json"));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(AtomicFileTest, ReplacesExistingFileAndItsMode) {
  const std::string path = dir_ + "/checkpoint.json";
  ASSERT_TRUE(WriteFileAtomically(path, "old contents that are longer", 0600).ok());
  struct stat before;
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  ASSERT_TRUE(WriteFileAtomically(path, "new", 0644).ok());
  EXPECT_EQ(*ReadFile(path), "new");
  EXPECT_EQ(Mode(path), 0644);
  struct stat after;
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_NE(before.st_ino, after.st_ino) << "replaced by rename, not rewritten in place";
  EXPECT_THAT(Entries(dir_), UnorderedElementsAre("checkpoint.json"));
}

TEST_F(AtomicFileTest, ReplacesSymlinkInsteadOfFollowingIt) {
  const std::string target = dir_ + "/target";
  const std::string link = dir_ + "/link";
  ASSERT_TRUE(WriteFileAtomically(target, "target").ok());
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(link, "link").ok());
  EXPECT_EQ(*ReadFile(target), "target");
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST_F(AtomicFileTest, RelativePathUsesCurrentDirectory) {
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(::chdir(dir_.c_str()), 0);
  absl::Status s = WriteFileAtomically("relative.txt", "r");
  ASSERT_EQ(::chdir(cwd), 0);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(*ReadFile(dir_ + "/relative.txt"), "r");
}

TEST_F(AtomicFileTest, MissingDirectoryFailsNamingPathAndStep) {
  const std::string path = dir_ + "/no/such/dir/file";
  absl::Status s = WriteFileAtomically(path, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("write " + path + ": "), HasSubstr("create temporary file in"),
                    HasSubstr("no such file or directory")));
}

TEST_F(AtomicFileTest, FailedRenameLeavesNoTempFile) {
  // A non-empty directory at the target path: the temp file is written, the rename fails.
  const std::string path = dir_ + "/occupied";
  ASSERT_EQ(::mkdir(path.c_str(), 0755), 0);
  ASSERT_TRUE(WriteFileAtomically(path + "/inside", "x").ok());
  absl::Status s = WriteFileAtomically(path, "contents");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), AllOf(HasSubstr("write " + path + ": rename "), HasSubstr(".tmp.")));
  EXPECT_THAT(Entries(dir_), UnorderedElementsAre("occupied"));
  EXPECT_THAT(Entries(path), UnorderedElementsAre("inside"));
}

TEST_F(AtomicFileTest, PathEndingInSlashIsRejected) {
  absl::Status s = WriteFileAtomically(dir_ + "/", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Entries(dir_), ::testing::IsEmpty());
}

TEST_F(AtomicFileTest, ConcurrentWritersEachLeaveACompleteFile) {
  const std::string path = dir_ + "/contended";
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&path, t] {
      const std::string contents(size_t{64} * 1024, static_cast<char>('a' + t));
      for (int i = 0; i < 20; ++i) ASSERT_TRUE(WriteFileAtomically(path, contents).ok());
    });
  }
  for (auto& thread : threads) thread.join();
  absl::StatusOr<std::string> read = ReadFile(path);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->size(), 64u * 1024);
  EXPECT_EQ(read->find_first_not_of(read->front()), std::string::npos) << "mixed contents";
  EXPECT_THAT(Entries(dir_), UnorderedElementsAre("contended"));
}

TEST_F(AtomicFileTest, ReadFileErrors) {
  absl::StatusOr<std::string> missing = ReadFile(dir_ + "/missing");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "read " + dir_ + "/missing: no such file or directory");
  absl::StatusOr<std::string> directory = ReadFile(dir_);
  EXPECT_FALSE(directory.ok());
  EXPECT_THAT(directory.status().message(), HasSubstr("read " + dir_));
}

TEST_F(AtomicFileTest, UnreadableFileIsPermissionDenied) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads anything";
  const std::string path = dir_ + "/secret";
  ASSERT_TRUE(WriteFileAtomically(path, "s", 0000).ok());
  EXPECT_EQ(ReadFile(path).status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(AtomicFileTest, ReadOnlyDirectoryFailsWithoutLeftovers) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes anywhere";
  const std::string ro = dir_ + "/ro";
  ASSERT_EQ(::mkdir(ro.c_str(), 0555), 0);
  absl::Status s = WriteFileAtomically(ro + "/f", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(Entries(ro), ::testing::IsEmpty());
  ::chmod(ro.c_str(), 0755);
}

}  // namespace
}  // namespace dra
