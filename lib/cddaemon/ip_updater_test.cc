#include "lib/cddaemon/ip_updater.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lib/common/atomic_file.h"

namespace dra::cddaemon {
namespace {

k8s::ComputeDomainDaemonInfo D(std::string ip, std::string clique) {
  k8s::ComputeDomainDaemonInfo d;
  d.ip_address = std::move(ip);
  d.clique_id = std::move(clique);
  return d;
}

TEST(IpNodesFileTest, SameCliqueInListOrder) {
  EXPECT_EQ(
      IpNodesFile({D("10.0.0.3", "c"), D("10.0.0.9", "x"), D("10.0.0.1", "c"), D("", "c")}, "c"),
      "10.0.0.3\n10.0.0.1\n");
}

TEST(IpUpdaterTest, WritesAndRestartsOnlyOnChange) {
  std::string path = absl::StrCat(::testing::TempDir(), "/ipnodes-", ::getpid());
  ImexProcess imex({.argv = {"sleep", "100"}});
  IpUpdater u(path, "c", &imex);
  ASSERT_TRUE(u.Update({D("10.0.0.1", "c")}).ok());
  EXPECT_EQ(*ReadFile(path), "10.0.0.1\n");
  pid_t first = imex.pid();
  ASSERT_GT(first, 0);
  ASSERT_TRUE(u.Update({D("10.0.0.1", "c"), D("10.0.0.7", "other")}).ok());
  EXPECT_EQ(imex.pid(), first) << "same list: no restart";
  ASSERT_TRUE(u.Update({D("10.0.0.1", "c"), D("10.0.0.2", "c")}).ok());
  EXPECT_EQ(*ReadFile(path), "10.0.0.1\n10.0.0.2\n");
  EXPECT_NE(imex.pid(), first) << "changed list: restarted";
  EXPECT_GT(imex.pid(), 0);
  EXPECT_EQ(imex.restarts(), 0) << "a deliberate restart is no crash restart";
  imex.Stop();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace dra::cddaemon
