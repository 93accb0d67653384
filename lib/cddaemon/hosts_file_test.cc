#include "lib/cddaemon/hosts_file.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/atomic_file.h"

namespace dra::cddaemon {
namespace {

using ::testing::HasSubstr;

k8s::ComputeDomainDaemonInfo Daemon(std::string node, std::string ip, std::string clique,
                                    int64_t index) {
  k8s::ComputeDomainDaemonInfo d;
  d.node_name = std::move(node);
  d.ip_address = std::move(ip);
  d.clique_id = std::move(clique);
  d.index = index;
  return d;
}

constexpr char kKubeletHosts[] =
    "# Kubernetes-managed hosts file.\n"
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "\n"
    "10.244.1.7\tdaemon-pod-abc\n";

// An address is written into /etc/hosts as is: one with a newline or a blank would add lines or
// names that no later rewrite removes (found by the IMEX files fuzz target, seed
// clique_ip_newline.json). An IPv6 address is fine.
TEST(BuildDnsMappingsTest, AnAddressThatIsNotOneIsRefused) {
  for (const std::string& ip :
       {std::string("10.0.0.1\n10.6.6.6 kubernetes.default.svc"), std::string("10.0.0.2 extra"),
        std::string("# BEGIN"), std::string("10.0.0.256"), std::string("10.0.0.1\0x", 10)}) {
    absl::StatusOr<DnsMappings> m = BuildDnsMappings({Daemon("n1", ip, "c.1", 0)}, "c.1", 4);
    ASSERT_FALSE(m.ok()) << absl::CHexEscape(ip);
    EXPECT_THAT(std::string(m.status().message()),
                HasSubstr("daemon of node n1 has the address \""));
  }
  absl::StatusOr<DnsMappings> m = BuildDnsMappings({Daemon("n1", "fd00::1", "c.1", 0)}, "c.1", 4);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->at("compute-domain-daemon-0000"), "fd00::1");
}

TEST(BuildDnsMappingsTest, OnlyOwnCliqueSortedByName) {
  absl::StatusOr<DnsMappings> m =
      BuildDnsMappings({Daemon("n2", "10.0.0.2", "c.1", 1), Daemon("x", "10.9.9.9", "c.2", 0),
                        Daemon("n1", "10.0.0.1", "c.1", 0)},
                       "c.1", 18);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, (DnsMappings{{"compute-domain-daemon-0000", "10.0.0.1"},
                             {"compute-domain-daemon-0001", "10.0.0.2"}}));
}

TEST(BuildDnsMappingsTest, IndexOutOfRangeIsAnError) {
  absl::StatusOr<DnsMappings> m = BuildDnsMappings({Daemon("n9", "10.0.0.9", "c", 4)}, "c", 4);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("n9"));
  EXPECT_THAT(m.status().message(), HasSubstr("index 4"));
  EXPECT_FALSE(BuildDnsMappings({Daemon("n", "10.0.0.9", "c", -1)}, "c", 4).ok());
}

TEST(RenderHostsFileTest, AppendsSortedBlockAndKeepsOtherLinesByteForByte) {
  DnsMappings m{{"compute-domain-daemon-0001", "10.0.0.2"},
                {"compute-domain-daemon-0000", "10.0.0.1"}};
  std::string out = RenderHostsFile(kKubeletHosts, m);
  EXPECT_EQ(out, absl::StrCat(kKubeletHosts, kHostsBlockBegin,
                              "\n10.0.0.1\tcompute-domain-daemon-0000\n"
                              "10.0.0.2\tcompute-domain-daemon-0001\n",
                              kHostsBlockEnd, "\n"));
}

TEST(RenderHostsFileTest, IdempotentAndReplacesTheBlockAsAWhole) {
  DnsMappings a{{"compute-domain-daemon-0000", "10.0.0.1"},
                {"compute-domain-daemon-0001", "10.0.0.2"}};
  DnsMappings b{{"compute-domain-daemon-0001", "10.0.0.3"}};
  std::string once = RenderHostsFile(kKubeletHosts, a);
  EXPECT_EQ(RenderHostsFile(once, a), once);
  std::string changed = RenderHostsFile(once, b);
  EXPECT_EQ(changed,
            absl::StrCat(kKubeletHosts, kHostsBlockBegin,
                         "\n10.0.0.3\tcompute-domain-daemon-0001\n", kHostsBlockEnd, "\n"));
  // Many rewrites do not grow the file.
  std::string x = once;
  for (int i = 0; i < 10; ++i) x = RenderHostsFile(RenderHostsFile(x, b), a);
  EXPECT_EQ(x, once);
}

TEST(RenderHostsFileTest, EmptyMappingsRemoveTheBlock) {
  std::string once = RenderHostsFile(kKubeletHosts, {{"compute-domain-daemon-0000", "1.2.3.4"}});
  EXPECT_EQ(RenderHostsFile(once, {}), kKubeletHosts);
}

TEST(RenderHostsFileTest, DropsLinesLeftByTheGoDaemon) {
  std::string go_style = absl::StrCat(kKubeletHosts,
                                      "# Compute Domain Daemon mappings\n"
                                      "10.0.0.5\tcompute-domain-daemon-0003\n");
  EXPECT_EQ(RenderHostsFile(go_style, {}), kKubeletHosts);
}

TEST(RenderHostsFileTest, AddsMissingFinalNewlineToLastForeignLine) {
  EXPECT_EQ(RenderHostsFile("127.0.0.1 localhost", {{"compute-domain-daemon-0000", "1.2.3.4"}}),
            absl::StrCat("127.0.0.1 localhost\n", kHostsBlockBegin,
                         "\n1.2.3.4\tcompute-domain-daemon-0000\n", kHostsBlockEnd, "\n"));
}

class HostsFileDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = absl::StrCat(::testing::TempDir(), "/hosts-", ::getpid(), "-",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(WriteFileAtomically(path_, kKubeletHosts).ok());
  }
  void TearDown() override { std::filesystem::remove(path_); }
  ino_t Inode() {
    struct stat st;
    EXPECT_EQ(::stat(path_.c_str(), &st), 0);
    return st.st_ino;
  }
  std::string path_;
};

TEST_F(HostsFileDiskTest, UpdateWritesAndSkipsUnchanged) {
  DnsMappings m{{"compute-domain-daemon-0000", "10.0.0.1"}};
  ASSERT_TRUE(UpdateHostsFile(path_, m).ok());
  EXPECT_EQ(*ReadFile(path_), RenderHostsFile(kKubeletHosts, m));
  ino_t before = Inode();
  ASSERT_TRUE(UpdateHostsFile(path_, m).ok());
  EXPECT_EQ(Inode(), before) << "an unchanged mapping must not rewrite the file";
}

TEST_F(HostsFileDiskTest, InPlaceWriteKeepsTheInodeAndTruncates) {
  // A bind-mounted /etc/hosts must keep its inode: the mount refers to it.
  ino_t before = Inode();
  ASSERT_TRUE(WriteFileInPlace(path_, "short\n").ok());
  EXPECT_EQ(Inode(), before);
  EXPECT_EQ(*ReadFile(path_), "short\n");
  ASSERT_TRUE(WriteFileInPlace(path_, std::string(10000, 'x')).ok());
  EXPECT_EQ(ReadFile(path_)->size(), 10000u);
}

TEST_F(HostsFileDiskTest, InPlaceWriteOfMissingFileFails) {
  EXPECT_FALSE(WriteFileInPlace(path_ + ".missing", "x").ok());
}

// /etc/hosts in a pod is a file bind-mounted by the kubelet: a rename over it fails with EBUSY.
// Reproduced with a bind mount in a private mount namespace (needs CAP_SYS_ADMIN; reported as
// skipped, not passed, without it).
TEST_F(HostsFileDiskTest, BindMountedHostsFileIsRewrittenInPlace) {
  const std::string target = path_ + ".target";
  ASSERT_TRUE(WriteFileAtomically(target, "old target contents\n").ok());
  DnsMappings m{{"compute-domain-daemon-0000", "10.0.0.1"}};
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::unshare(CLONE_NEWNS) != 0) ::_exit(77);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(77);
    if (::mount(path_.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) ::_exit(77);
    if (::rename(path_.c_str(), target.c_str()) == 0 || errno != EBUSY) ::_exit(3);  // premise
    bool in_place = false;
    absl::Status s = UpdateHostsFile(target, m, &in_place);
    if (!s.ok()) ::_exit(4);
    if (!in_place) ::_exit(5);  // the mount was not recognised: every write would retry rename
    // The next write goes in place at once (and must still work).
    ::_exit(UpdateHostsFile(target, {}, &in_place).ok() ? 0 : 6);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) {
    std::filesystem::remove(target);
    GTEST_SKIP() << "no permission for a private mount namespace";
  }
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The write went through the mount into the mounted file; the mount point's own file is
  // untouched.
  EXPECT_EQ(*ReadFile(path_), kKubeletHosts) << "mappings written, then removed, in place";
  EXPECT_EQ(*ReadFile(target), "old target contents\n");
  std::filesystem::remove(target);
}

}  // namespace
}  // namespace dra::cddaemon
