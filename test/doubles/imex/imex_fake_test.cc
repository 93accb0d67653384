// Tests of the fake nvidia-imex / nvidia-imex-ctl: several fakes on 127.0.0.x with one port form
// the mesh, ctl reports READY only when every resolvable peer is connected both ways, and SIGUSR1
// makes a fake re-read its nodes file and re-resolve.

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/doubles/imex/imex_config.h"

namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Result {
  int exit_code;
  std::string out;
  std::string err;
};

std::string Slurp(const std::string& path) { return fake_imex::ReadWholeFile(path).value_or(""); }

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// A port free on 127.0.0.2 and 127.0.0.3 right now (the kernel picks it for .2).
int FreePort() {
  for (int attempt = 0; attempt < 20; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa;
    fake_imex::MakeSockaddr("127.0.0.2", 0, &sa);
    (void)::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
    socklen_t len = sizeof(sa);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    int port = ntohs(sa.sin_port);
    ::close(fd);
    if (port < 65000) return port;
  }
  return 0;
}

class FakeImexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/fake-imex-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    port_ = FreePort();
    cmd_port_ = port_ + 1;
    ASSERT_GT(port_, 0);
  }
  void TearDown() override {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }

  // Writes the config of the fake at 127.0.0.<n> and returns its path.
  std::string Config(int n, const std::string& nodes_file, const std::string& extra = "") {
    std::string path = dir_ + "/imex" + std::to_string(n) + ".cfg";
    WriteFile(path, "# test config\nLOG_LEVEL=4\nSERVER_PORT=" + std::to_string(port_) +
                        "\nIMEX_NODE_CONFIG_FILE=" + nodes_file +
                        "\nIMEX_CMD_BIND_INTERFACE_IP=127.0.0." + std::to_string(n) +
                        "\nIMEX_CMD_PORT=" + std::to_string(cmd_port_) + "\n" + extra);
    return path;
  }

  pid_t StartImex(const std::string& config, const std::string& hosts_file = "") {
    std::string log = config + ".log";
    pid_t pid = ::fork();
    if (pid == 0) {
      if (!hosts_file.empty()) ::setenv("FAKE_IMEX_HOSTS_FILE", hosts_file.c_str(), 1);
      std::freopen(log.c_str(), "w", stderr);
      ::execl(DRA_FAKE_NVIDIA_IMEX, "nvidia-imex", "-c", config.c_str(), nullptr);
      ::_exit(127);
    }
    pids_.push_back(pid);
    return pid;
  }

  Result Run(const std::vector<std::string>& args) {
    std::string out = dir_ + "/out", err = dir_ + "/err";
    pid_t pid = ::fork();
    if (pid == 0) {
      std::freopen(out.c_str(), "w", stdout);
      std::freopen(err.c_str(), "w", stderr);
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(out), Slurp(err)};
  }

  Result Ctl(const std::string& config) {
    return Run({DRA_FAKE_NVIDIA_IMEX_CTL, "-c", config, "-q"});
  }

  // Polls ctl until its stdout satisfies `pred` (5 s).
  bool CtlEventually(const std::string& config, const std::function<bool(const Result&)>& pred) {
    for (int i = 0; i < 100; ++i) {
      if (pred(Ctl(config))) return true;
      ::usleep(50 * 1000);
    }
    return false;
  }
  static bool Ready(const Result& r) { return r.exit_code == 0 && r.out == "READY\n"; }
  static bool NotReady(const Result& r) { return r.exit_code == 1; }

  std::string dir_;
  int port_ = 0;
  int cmd_port_ = 0;
  std::vector<pid_t> pids_;
};

TEST_F(FakeImexTest, TwoPeersBecomeReadyAndLoseReadinessWhenOneStops) {
  std::string nodes = dir_ + "/nodes.cfg";
  WriteFile(nodes, "127.0.0.2\n127.0.0.3\n");
  std::string c2 = Config(2, nodes), c3 = Config(3, nodes);
  StartImex(c2);
  ASSERT_TRUE(CtlEventually(c2, NotReady));
  Result r = Ctl(c2);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, StartsWith("NOT READY: waiting for peers:"));
  EXPECT_THAT(r.out, HasSubstr("127.0.0.3"));

  pid_t p3 = StartImex(c3);
  ASSERT_TRUE(CtlEventually(c2, Ready)) << Ctl(c2).out;
  ASSERT_TRUE(CtlEventually(c3, Ready)) << Ctl(c3).out;

  ::kill(p3, SIGTERM);
  int status = 0;
  ::waitpid(p3, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "SIGTERM exits cleanly";
  ASSERT_TRUE(CtlEventually(c2, NotReady));

  // Restarted, the peer is retried (every second) and both are READY again.
  StartImex(c3);
  EXPECT_TRUE(CtlEventually(c2, Ready));
}

TEST_F(FakeImexTest, ThreePeers) {
  std::string nodes = dir_ + "/nodes.cfg";
  WriteFile(nodes, "127.0.0.2\n127.0.0.3\n127.0.0.4\n");
  std::string c2 = Config(2, nodes), c3 = Config(3, nodes), c4 = Config(4, nodes);
  StartImex(c2);
  StartImex(c3);
  ASSERT_TRUE(CtlEventually(c2, NotReady));
  StartImex(c4);
  EXPECT_TRUE(CtlEventually(c2, Ready));
  EXPECT_TRUE(CtlEventually(c3, Ready));
  EXPECT_TRUE(CtlEventually(c4, Ready));
}

TEST_F(FakeImexTest, UnresolvableNamesAreUnusedSlotsAndSigusr1Reresolves) {
  std::string nodes = dir_ + "/nodes.cfg";
  std::string hosts = dir_ + "/hosts";
  WriteFile(nodes, "node-a\nnode-b\nnode-c\n");
  WriteFile(hosts, "127.0.0.2\tnode-a\n");
  std::string c2 = Config(2, nodes), c3 = Config(3, nodes);
  pid_t p2 = StartImex(c2, hosts);
  // Only itself resolves: no peers, READY.
  ASSERT_TRUE(CtlEventually(c2, Ready));
  WriteFile(hosts, "127.0.0.2\tnode-a\n127.0.0.3 node-b\n");
  StartImex(c3, hosts);  // resolves both: connects to .2, but .2 does not know .3 yet
  ASSERT_TRUE(CtlEventually(c3, NotReady));
  ::usleep(1500 * 1000);
  EXPECT_TRUE(Ready(Ctl(c2))) << "without SIGUSR1 the fake keeps its old peer set";
  Result r3 = Ctl(c3);
  EXPECT_EQ(r3.exit_code, 1);
  // .3 reaches .2, but .2 has not connected back: the missing direction is named.
  EXPECT_EQ(r3.out, "NOT READY: waiting for peers: node-a(127.0.0.2:in)\n");

  ::kill(p2, SIGUSR1);
  EXPECT_TRUE(CtlEventually(c2, Ready));
  EXPECT_TRUE(CtlEventually(c3, Ready));
  EXPECT_THAT(Slurp(c2 + ".log"), HasSubstr("SIGUSR1"));
}

TEST_F(FakeImexTest, CtlWithoutDaemonFails) {
  std::string nodes = dir_ + "/nodes.cfg";
  WriteFile(nodes, "127.0.0.2\n");
  Result r = Ctl(Config(2, nodes));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("cannot connect to the IMEX daemon"));
}

// A host-managed daemon's command channel: IMEX_CMD_UNIX_DOMAIN_PATH, queried with --u / -u.
TEST_F(FakeImexTest, UnixSocketCommandChannel) {
  std::string nodes = dir_ + "/nodes.cfg";
  WriteFile(nodes, "127.0.0.2\n127.0.0.3\n");
  const std::string sock = dir_ + "/imex_ctrl.sock";
  std::string c2 = Config(2, nodes, "IMEX_CMD_UNIX_DOMAIN_PATH=" + sock + "\n");
  auto query = [&](const std::string& form) {
    return form == "--u" ? Run({DRA_FAKE_NVIDIA_IMEX_CTL, "-q", "--u=" + sock})
                         : Run({DRA_FAKE_NVIDIA_IMEX_CTL, "-u", sock, "-q"});
  };
  Result none = query("--u");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("cannot connect to the IMEX daemon at unix socket " + sock));

  pid_t p2 = StartImex(c2);
  bool not_ready = false;
  for (int i = 0; i < 100 && !not_ready; ++i) {
    not_ready = query("--u").exit_code == 1;
    if (!not_ready) ::usleep(50 * 1000);
  }
  ASSERT_TRUE(not_ready);
  EXPECT_THAT(query("-u").out, HasSubstr("NOT READY: waiting for peers: 127.0.0.3"));
  StartImex(Config(3, nodes));
  bool ready = false;
  for (int i = 0; i < 100 && !ready; ++i) {
    ready = Ready(query("--u"));
    if (!ready) ::usleep(50 * 1000);
  }
  EXPECT_TRUE(ready);
  EXPECT_TRUE(Ready(query("-u")));
  EXPECT_TRUE(Ready(Ctl(c2))) << "the TCP command port still answers";

  ::kill(p2, SIGTERM);
  ::waitpid(p2, nullptr, 0);
  EXPECT_FALSE(std::filesystem::exists(sock)) << "the socket goes with the daemon";
  EXPECT_EQ(query("--u").exit_code, 2);
}

TEST_F(FakeImexTest, CtlNeedsAConfigOrASocket) {
  Result r = Run({DRA_FAKE_NVIDIA_IMEX_CTL, "-q"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--u=<socket>"));
}

TEST_F(FakeImexTest, MalformedConfigLineIsAnErrorNamingTheLine) {
  std::string cfg = dir_ + "/bad.cfg";
  WriteFile(cfg, "SERVER_PORT=50000\n\nTHIS LINE IS BROKEN\n");
  Result r = Run({DRA_FAKE_NVIDIA_IMEX, "-c", cfg});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(cfg + ":3:"));
  Result ctl = Ctl(cfg);
  EXPECT_EQ(ctl.exit_code, 2);
  EXPECT_THAT(ctl.err, HasSubstr(cfg + ":3:"));
}

TEST(ImexConfigParseTest, KeysDefaultsAndErrors) {
  std::string err;
  auto c = fake_imex::ParseImexConfig(
      "SERVER_PORT = 51000\nIMEX_CMD_PORT=51005\nIMEX_NODE_CONFIG_FILE=/imexd/nodes.cfg\n"
      "IMEX_CMD_BIND_INTERFACE_IP=10.1.2.3\nLOG_FILE_NAME=\nUNKNOWN_KEY=1\n"
      "IMEX_CMD_UNIX_DOMAIN_PATH=/etc/nvidia-imex/imex_ctrl.sock\n",
      "f", &err);
  ASSERT_TRUE(c.has_value()) << err;
  EXPECT_EQ(c->server_port, 51000);
  EXPECT_EQ(c->cmd_port, 51005);
  EXPECT_EQ(c->node_config_file, "/imexd/nodes.cfg");
  EXPECT_EQ(c->cmd_bind_ip, "10.1.2.3");
  EXPECT_EQ(c->bind_ip, "");
  EXPECT_EQ(c->cmd_unix_path, "/etc/nvidia-imex/imex_ctrl.sock");
  EXPECT_FALSE(fake_imex::ParseImexConfig("SERVER_PORT=0\n", "f", &err).has_value());
  EXPECT_EQ(err, "f:1: SERVER_PORT: not a port: 0");
  EXPECT_FALSE(fake_imex::ParseImexConfig("=x\n", "f", &err).has_value());
}

TEST(ImexConfigParseTest, NodesFile) {
  EXPECT_EQ(fake_imex::ParseNodesFile("a\n\n  b \n# c\nd"),
            (std::vector<std::string>{"a", "b", "d"}));
}

}  // namespace
