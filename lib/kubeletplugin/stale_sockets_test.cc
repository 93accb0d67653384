#include "lib/kubeletplugin/stale_sockets.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/kubeletplugin/test_util.h"

namespace dra::kubeletplugin {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A unix socket bound at `path`; listening when `listen` is set. Closing it without unlinking
// leaves the file behind, as a killed process does.
int BindSocket(const std::string& path, bool listen) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0) << path;
  if (listen) {
    EXPECT_EQ(::listen(fd, 1), 0);
  }
  return fd;
}

TEST(StaleSocketsTest, RemovesOnlyMatchingDeadSocketsAndKeepsLiveOwnAndOtherFiles) {
  testing::TempTree tree;
  const std::string dir = tree.plugins();
  ::close(BindSocket(dir + "/dra-dead.sock", /*listen=*/false));
  const int live = BindSocket(dir + "/dra-live.sock", /*listen=*/true);
  ::close(BindSocket(dir + "/dra-own.sock", /*listen=*/false));
  ::close(BindSocket(dir + "/other-dead.sock", /*listen=*/false));
  std::ofstream(dir + "/dra-file.sock") << "not a socket";

  EXPECT_TRUE(SocketRefusesConnections(dir + "/dra-dead.sock"));
  EXPECT_FALSE(SocketRefusesConnections(dir + "/dra-live.sock"));

  auto removed = SweepStaleSockets({.dir = dir,
                                    .prefix = "dra-",
                                    .suffix = ".sock",
                                    .keep = dir + "/dra-own.sock",
                                    .min_age = absl::ZeroDuration()});
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_THAT(*removed, ElementsAre(dir + "/dra-dead.sock"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/dra-dead.sock"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/dra-live.sock"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/dra-own.sock"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/other-dead.sock"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/dra-file.sock"));
  ::close(live);
}

TEST(StaleSocketsTest, LiveSocketsListsOnlyOtherMatchingListeningSockets) {
  testing::TempTree tree;
  const std::string dir = tree.plugins();
  ::close(BindSocket(dir + "/drv-dead-reg.sock", /*listen=*/false));
  const int live = BindSocket(dir + "/drv-live-reg.sock", /*listen=*/true);
  const int own = BindSocket(dir + "/drv-own-reg.sock", /*listen=*/true);
  const int other = BindSocket(dir + "/other-live-reg.sock", /*listen=*/true);
  std::ofstream(dir + "/drv-file-reg.sock") << "not a socket";

  EXPECT_TRUE(SocketAcceptsConnections(dir + "/drv-live-reg.sock"));
  EXPECT_FALSE(SocketAcceptsConnections(dir + "/drv-dead-reg.sock"));
  EXPECT_FALSE(SocketAcceptsConnections(dir + "/missing.sock"));
  EXPECT_THAT(
      LiveSockets(
          {.dir = dir, .prefix = "drv-", .suffix = "-reg.sock", .keep = dir + "/drv-own-reg.sock"}),
      ElementsAre(dir + "/drv-live-reg.sock"));
  ::close(live);
  EXPECT_THAT(
      LiveSockets(
          {.dir = dir, .prefix = "drv-", .suffix = "-reg.sock", .keep = dir + "/drv-own-reg.sock"}),
      IsEmpty());
  EXPECT_THAT(LiveSockets({.dir = dir + "/missing"}), IsEmpty());
  ::close(own);
  ::close(other);
}

TEST(StaleSocketsTest, LeavesRecentSocketsThatMayBeAboutToListen) {
  testing::TempTree tree;
  const std::string dir = tree.plugins();
  ::close(BindSocket(dir + "/dra-new.sock", /*listen=*/false));
  auto removed = SweepStaleSockets(
      {.dir = dir, .prefix = "dra-", .suffix = ".sock", .min_age = absl::Minutes(1)});
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_THAT(*removed, IsEmpty());
  EXPECT_TRUE(std::filesystem::exists(dir + "/dra-new.sock"));
}

TEST(StaleSocketsTest, UnreadableDirectoryIsAnError) {
  auto removed = SweepStaleSockets({.dir = "/nonexistent-dir-for-sweep", .prefix = "dra-"});
  EXPECT_FALSE(removed.ok());
  EXPECT_THAT(std::string(removed.status().message()),
              ::testing::HasSubstr("/nonexistent-dir-for-sweep"));
}

}  // namespace
}  // namespace dra::kubeletplugin
