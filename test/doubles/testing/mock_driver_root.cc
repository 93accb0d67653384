#include "test/doubles/testing/mock_driver_root.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "lib/common/atomic_file.h"
#include "lib/common/status.h"

namespace dra::testing {

std::string MakeDriverRootScript() { return DRA_MAKE_DRIVER_ROOT_SCRIPT; }
std::string MockNvmlLibraryPath() { return DRA_MOCK_NVML_LIBRARY; }
std::string FakeNvidiaSmiPath() { return DRA_FAKE_NVIDIA_SMI; }
std::string FakeMpsControlPath() { return DRA_FAKE_MPS_CONTROL; }
std::string FakeNvfmLibraryPath() { return DRA_FAKE_NVFM_LIBRARY; }
std::string ProfilePath(std::string_view profile) {
  return absl::StrCat(DRA_DOUBLES_SOURCE_DIR, "/profiles/",
                      absl::string_view(profile.data(), profile.size()), ".json");
}

TempDir::TempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string pattern =
      absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp", "/dra-nvml-test-XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) std::abort();  // a test cannot go on without it
  path_ = pattern;
}

TempDir::~TempDir() {
  // Replaced files may still be queued for unlinking in this process.
  dra::WaitForBackgroundUnlinks();
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::map<std::string, std::string>& env) {
  if (argv.empty()) return absl::InvalidArgumentError("run command: empty argv");
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  // Everything the child needs is prepared before fork: only async-signal-safe calls after it.
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) merged[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [key, value] : env) merged[key] = value;
  std::vector<std::string> env_strings;
  env_strings.reserve(merged.size());
  for (const auto& [key, value] : merged) env_strings.push_back(absl::StrCat(key, "=", value));
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  CommandResult result;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof(buffer))) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    result.output.append(buffer, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

namespace {

// Programs run against a mock root (the plugin's nvidia-smi runs) get the mock library through
// LD_PRELOAD. In a sanitizer build both are instrumented, and ASan refuses to start when a
// preloaded library comes before its runtime; children of this test process may do that.
// gcc defines __SANITIZE_ADDRESS__; clang 14 only answers __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define DRA_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DRA_ADDRESS_SANITIZER 1
#endif
#endif

void AllowPreloadedMockInChildren() {
#if defined(DRA_ADDRESS_SANITIZER)
  const char* current = std::getenv("ASAN_OPTIONS");
  std::string options = current != nullptr ? current : "";
  if (options.find("verify_asan_link_order") != std::string::npos) return;
  options += options.empty() ? "verify_asan_link_order=0" : ":verify_asan_link_order=0";
  ::setenv("ASAN_OPTIONS", options.c_str(), 1);
#endif
}

}  // namespace

absl::Status MakeMockDriverRoot(std::string_view profile, const std::string& dir,
                                bool reset_state) {
  AllowPreloadedMockInChildren();
  std::vector<std::string> argv = {
      MakeDriverRootScript(), "--lib",         MockNvmlLibraryPath(), "--smi",
      FakeNvidiaSmiPath(),    "--mps-control", FakeMpsControlPath()};
  if (reset_state) argv.push_back("--reset-state");
  argv.push_back(std::string(profile));
  argv.push_back(dir);
  absl::StatusOr<CommandResult> result = RunCommand(argv);
  if (!result.ok()) return result.status();
  if (result->exit_code != 0) {
    return absl::InternalError(
        absl::StrCat("make-driver-root.sh ", absl::string_view(profile.data(), profile.size()), " ",
                     dir, ": exit ", result->exit_code, ": ", result->output));
  }
  return absl::OkStatus();
}

absl::Status InstallFakeFabricManager(const std::string& root, const std::string& partitions_json,
                                      const std::string& host_root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path lib_dir = fs::path(root) / "usr/lib/x86_64-linux-gnu";
  const fs::path state_dir = fs::path(root) / "var/lib/mock-nvfm";
  fs::create_directories(lib_dir, ec);
  if (!ec) fs::create_directories(state_dir, ec);
  if (!ec) {
    fs::copy_file(FakeNvfmLibraryPath(), lib_dir / "libnvfm.so.1",
                  fs::copy_options::overwrite_existing, ec);
  }
  if (ec) return absl::InternalError(absl::StrCat("install the fake libnvfm: ", ec.message()));
  for (const char* f : {"state.json", "inject.json", "calls.log"}) fs::remove(state_dir / f, ec);
  RETURN_IF_ERROR(WriteFileAtomically((state_dir / "partitions.json").string(), partitions_json));
  if (!host_root.empty()) {
    const fs::path nvswitch = fs::path(host_root) / "proc/driver/nvidia-nvswitch/devices";
    fs::create_directories(nvswitch, ec);
    if (ec)
      return absl::InternalError(absl::StrCat("create ", nvswitch.string(), ": ", ec.message()));
    RETURN_IF_ERROR(WriteFileAtomically((nvswitch / "0000:05:00.0").string(), ""));
  }
  return absl::OkStatus();
}

}  // namespace dra::testing
