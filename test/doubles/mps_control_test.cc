// The fake nvidia-cuda-mps-control, run as the MPS control-daemon pod runs it: `-d`, then
// commands piped in through a shell.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kGpu0[] = "GPU-00000000-1111-2222-3333-444444444444";
constexpr char kGpu1[] = "GPU-55555555-6666-7777-8888-999999999999";

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class MpsControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pipe_ = tmp_.path() + "/pipe";
    logs_ = tmp_.path() + "/log";
    shm_ = tmp_.path() + "/shm";
    std::filesystem::create_directories(shm_);
  }
  void TearDown() override {
    // Whatever a test left running.
    std::ifstream pid_file(pipe_ + "/nvidia-cuda-mps-control.pid");
    pid_t pid = 0;
    if (pid_file >> pid && pid > 0) ::kill(pid, SIGKILL);
  }

  std::map<std::string, std::string> Env(const std::string& visible = "") {
    return {{"CUDA_MPS_PIPE_DIRECTORY", pipe_},
            {"CUDA_MPS_LOG_DIRECTORY", logs_},
            {"CUDA_VISIBLE_DEVICES", visible},
            {"MOCK_MPS_SHM_DIRECTORY", shm_}};
  }

  CommandResult Start(const std::vector<std::string>& extra = {},
                      const std::string& visible = absl::StrCat(kGpu0, ",", kGpu1)) {
    std::vector<std::string> argv = {FakeMpsControlPath(), "-d"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    absl::StatusOr<CommandResult> r = RunCommand(argv, Env(visible));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : CommandResult{};
  }

  // `echo <commands> | nvidia-cuda-mps-control`, as the pod's script sends them.
  CommandResult Send(const std::string& commands) {
    absl::StatusOr<CommandResult> r = RunCommand(
        {"/bin/sh", "-c", absl::StrCat("printf '%s\\n' \"$CMDS\" | ", FakeMpsControlPath())}, [&] {
          auto env = Env();
          env["CMDS"] = commands;
          return env;
        }());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : CommandResult{};
  }

  json Settings() { return json::parse(Slurp(pipe_ + "/settings.json"), nullptr, false); }

  TempDir tmp_;
  std::string pipe_, logs_, shm_;
};

TEST_F(MpsControlTest, DaemonRecordsTheSettingsItIsSent) {
  CommandResult started = Start();
  ASSERT_EQ(started.exit_code, 0) << started.output;
  EXPECT_TRUE(std::filesystem::exists(pipe_ + "/control"));
  json s = Settings();
  EXPECT_EQ(s["multiUser"], false);
  EXPECT_EQ(s["visibleDevices"], json({kGpu0, kGpu1}));
  EXPECT_FALSE(s.contains("defaultActiveThreadPercentage"));
  EXPECT_EQ(s["defaultDevicePinnedMemLimits"], json::object());
  const int pid = s["pid"];
  EXPECT_TRUE(std::filesystem::exists(shm_ + "/nvidia-mps-control-daemon." + std::to_string(pid)));

  CommandResult get = Send("get_default_active_thread_percentage");
  EXPECT_EQ(get.exit_code, 0);
  EXPECT_EQ(get.output, "100.0\n");

  CommandResult set = Send(absl::StrCat("set_default_active_thread_percentage 50\n",
                                        "set_default_device_pinned_mem_limit ", kGpu0, " 1024M\n",
                                        "set_default_device_pinned_mem_limit ", kGpu1, " 2G"));
  EXPECT_EQ(set.exit_code, 0) << set.output;
  EXPECT_EQ(set.output, "");
  s = Settings();
  EXPECT_EQ(s["defaultActiveThreadPercentage"], 50.0);
  EXPECT_EQ(s["defaultDevicePinnedMemLimits"], json({{kGpu0, "1024M"}, {kGpu1, "2048M"}}));

  CommandResult gets = Send(absl::StrCat("get_default_active_thread_percentage\n",
                                         "get_default_device_pinned_mem_limit ", kGpu1));
  EXPECT_EQ(gets.output, "50.0\n2048M\n");

  const std::string log = Slurp(logs_ + "/control.log");
  EXPECT_THAT(log, HasSubstr("control daemon started, pipe directory " + pipe_));
  EXPECT_THAT(log, HasSubstr("command: set_default_active_thread_percentage 50"));

  CommandResult quit = Send("quit");
  EXPECT_EQ(quit.exit_code, 0) << quit.output;
  // The daemon removes its socket and marker as it exits (poll: it answers before it cleans up).
  for (int i = 0; i < 200 && std::filesystem::exists(pipe_ + "/control"); ++i) ::usleep(10000);
  EXPECT_FALSE(std::filesystem::exists(pipe_ + "/control"));
  for (int i = 0; i < 200 && std::filesystem::exists(pipe_ + "/nvidia-cuda-mps-control.pid"); ++i) {
    ::usleep(10000);
  }
  EXPECT_FALSE(std::filesystem::exists(shm_ + "/nvidia-mps-control-daemon." + std::to_string(pid)));
  EXPECT_THAT(Slurp(logs_ + "/control.log"), HasSubstr("control daemon exiting (quit)"));
  CommandResult after = Send("get_default_active_thread_percentage");
  EXPECT_EQ(after.exit_code, 1);
  EXPECT_THAT(after.output, HasSubstr("Cannot find MPS control daemon process"));
}

TEST_F(MpsControlTest, BadCommandsAreErrorsAndChangeNothing) {
  ASSERT_EQ(Start().exit_code, 0);
  struct Case {
    std::string command, want;
  };
  const std::vector<Case> cases = {
      {"frobnicate", "unknown command or wrong arguments: frobnicate"},
      {"set_default_active_thread_percentage 101", "want 0..100"},
      {"set_default_active_thread_percentage abc", "want 0..100"},
      {"set_default_active_thread_percentage", "wrong arguments"},
      {absl::StrCat("set_default_device_pinned_mem_limit ", kGpu0, " 0M"), "N > 0"},
      {absl::StrCat("set_default_device_pinned_mem_limit ", kGpu0, " 12X"), "want <N>M"},
      {"set_default_device_pinned_mem_limit GPU-other 1M", "not visible to this daemon"},
  };
  for (const Case& c : cases) {
    CommandResult r = Send(c.command);
    EXPECT_EQ(r.exit_code, 1) << c.command;
    EXPECT_THAT(r.output, HasSubstr(c.want)) << c.command;
  }
  // One bad line among good ones: the good ones apply, the exit code says something failed.
  CommandResult mixed = Send("set_default_active_thread_percentage 30\nbogus");
  EXPECT_EQ(mixed.exit_code, 1);
  json s = Settings();
  EXPECT_EQ(s["defaultActiveThreadPercentage"], 30.0);
  EXPECT_EQ(s["defaultDevicePinnedMemLimits"], json::object());
  EXPECT_EQ(Send("quit").exit_code, 0);
}

TEST_F(MpsControlTest, SecondDaemonOnOnePipeDirectoryIsRefused) {
  ASSERT_EQ(Start({"-M"}).exit_code, 0);
  EXPECT_EQ(Settings()["multiUser"], true);
  CommandResult again = Start();
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.output, HasSubstr("already running"));
  EXPECT_EQ(Send("quit").exit_code, 0);
}

TEST_F(MpsControlTest, StaleSocketOfAKilledDaemonIsReplaced) {
  ASSERT_EQ(Start().exit_code, 0);
  const int pid = Settings()["pid"];
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  // Dead once it is gone or a zombie (its parent is whatever reaps orphans here).
  auto alive = [pid] {
    const std::string status = Slurp("/proc/" + std::to_string(pid) + "/status");
    return !status.empty() && status.find("State:\tZ") == std::string::npos;
  };
  for (int i = 0; i < 200 && alive(); ++i) ::usleep(10000);
  ASSERT_FALSE(alive());
  ASSERT_TRUE(std::filesystem::exists(pipe_ + "/control"));  // left behind
  CommandResult r = Start();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(Settings()["pid"], pid);
  EXPECT_EQ(Send("quit").exit_code, 0);
}

TEST_F(MpsControlTest, PipeDirectoryLongerThanASocketAddress) {
  pipe_ = tmp_.path() + "/" + std::string(120, 'p') + "/pipe";
  ASSERT_EQ(Start().exit_code, 0);
  EXPECT_EQ(Send("get_default_active_thread_percentage").output, "100.0\n");
  EXPECT_EQ(Send("quit").exit_code, 0);
}

TEST_F(MpsControlTest, UsageErrors) {
  absl::StatusOr<CommandResult> r = RunCommand({FakeMpsControlPath(), "-x"}, Env());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_THAT(r->output, HasSubstr("unknown option -x"));
  r = RunCommand({FakeMpsControlPath(), "-M"}, Env());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 1);
}

}  // namespace
}  // namespace dra::testing
