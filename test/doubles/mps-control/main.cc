// A fake nvidia-cuda-mps-control for tests and the MPS control-daemon pods of the local cluster.
// It keeps the settings a real control daemon would apply to new MPS servers, so that tests can
// check what the driver asked for; it serves no CUDA clients.
//
//   nvidia-cuda-mps-control -d [-M]   start the control daemon in the background (-M: multi-user)
//   nvidia-cuda-mps-control           send the commands read from stdin, one a line, to the daemon
//                                     and print its answers
//
// Commands: set_default_active_thread_percentage <0..100>, get_default_active_thread_percentage,
// set_default_device_pinned_mem_limit <uuid> <N>M|<N>G, get_default_device_pinned_mem_limit
// <uuid>, quit. Anything else is answered with an error; the client exits 1 when any command
// failed or no daemon runs.
//
// Environment: CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps), CUDA_MPS_LOG_DIRECTORY (default
// /var/log/nvidia-mps), CUDA_VISIBLE_DEVICES (recorded; when set, pinned limits must name one of
// its UUIDs), MOCK_MPS_SHM_DIRECTORY (default /dev/shm).
//
// Files:
//   <pipe dir>/control          unix stream socket of the daemon: one connection per command, the
//                               client sends "<command line>\n", the daemon answers
//                               "ok\n<text>" or "error\n<text>" and closes
//   <pipe dir>/settings.json    what the daemon holds (rewritten atomically on every change):
//                               {"pid", "multiUser", "visibleDevices", "pipeDirectory",
//                                "defaultActiveThreadPercentage" (only once set),
//                                "defaultDevicePinnedMemLimits": {uuid: "<MiB>M"}}
//   <pipe dir>/nvidia-cuda-mps-control.pid
//   <log dir>/control.log       one line per event: "[<UTC time> control <pid>] <text>"
//   <shm dir>/nvidia-mps-control-daemon.<pid>  a marker, as the real daemon's shared memory lives
//                               there (removed on exit; skipped when the directory is unwritable)
//
// The socket is bound by its name relative to the pipe directory (the daemon's working
// directory), so that long host paths do not hit the 108-byte limit of unix socket addresses.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace {

constexpr char kSocketName[] = "control";
constexpr char kSettingsName[] = "settings.json";
constexpr char kPidName[] = "nvidia-cuda-mps-control.pid";

volatile sig_atomic_t g_stop = 0;

std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

bool MakeDirs(const std::string& dir) {
  std::string path;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || (dir[i] == '/' && i > 0)) {
      path = dir.substr(0, i);
      if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
  }
  return true;
}

std::string Absolute(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) != nullptr ? buf : path;
}

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

struct Daemon {
  std::string pipe_dir, log_dir, shm_marker;
  bool multi_user = false;
  std::vector<std::string> visible;
  std::optional<double> thread_percentage;
  std::map<std::string, std::string> pinned;  // uuid -> "<MiB>M"

  void Log(const std::string& text) const {
    char stamp[64];
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    tm t{};
    ::gmtime_r(&ts.tv_sec, &t);
    std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &t);
    char millis[24];
    std::snprintf(millis, sizeof(millis), ".%03ld", ts.tv_nsec / 1000000);
    std::string line = std::string("[") + stamp + millis + " control " +
                       std::to_string(::getpid()) + "] " + text + "\n";
    const int fd =
        ::open((log_dir + "/control.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t ignored = ::write(fd, line.data(), line.size());
    (void)ignored;
    ::close(fd);
  }

  void WriteSettings() const {
    nlohmann::ordered_json j;
    j["pid"] = ::getpid();
    j["multiUser"] = multi_user;
    j["visibleDevices"] = visible;
    j["pipeDirectory"] = pipe_dir;
    if (thread_percentage) j["defaultActiveThreadPercentage"] = *thread_percentage;
    j["defaultDevicePinnedMemLimits"] = nlohmann::ordered_json::object();
    for (const auto& [uuid, limit] : pinned) j["defaultDevicePinnedMemLimits"][uuid] = limit;
    const std::string text = j.dump(2) + "\n";
    const std::string tmp = pipe_dir + "/." + kSettingsName + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t ignored = ::write(fd, text.data(), text.size());
    (void)ignored;
    ::fsync(fd);
    ::close(fd);
    ::rename(tmp.c_str(), (pipe_dir + "/" + kSettingsName).c_str());
  }

  // Returns {ok, text}; sets *quit for "quit".
  std::pair<bool, std::string> Handle(const std::string& line, bool* quit) {
    const std::vector<std::string> w = Words(line);
    if (w.empty()) return {true, ""};
    const std::string& cmd = w[0];
    if (cmd == "quit" && w.size() == 1) {
      *quit = true;
      return {true, ""};
    }
    if (cmd == "get_default_active_thread_percentage" && w.size() == 1) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.1f", thread_percentage.value_or(100.0));
      return {true, buf};
    }
    if (cmd == "set_default_active_thread_percentage" && w.size() == 2) {
      char* end = nullptr;
      errno = 0;
      const double p = std::strtod(w[1].c_str(), &end);
      if (errno != 0 || end == w[1].c_str() || *end != '\0' || !(p >= 0 && p <= 100)) {
        return {false, "invalid active thread percentage \"" + w[1] + "\": want 0..100"};
      }
      thread_percentage = p;
      WriteSettings();
      return {true, ""};
    }
    if (cmd == "get_default_device_pinned_mem_limit" && w.size() == 2) {
      auto it = pinned.find(w[1]);
      return {true, it == pinned.end() ? "none" : it->second};
    }
    if (cmd == "set_default_device_pinned_mem_limit" && w.size() == 3) {
      const std::string& uuid = w[1];
      if (!visible.empty() && std::find(visible.begin(), visible.end(), uuid) == visible.end()) {
        return {false, "device " + uuid + " is not visible to this daemon (CUDA_VISIBLE_DEVICES)"};
      }
      const std::string& v = w[2];
      const char unit = v.empty() ? '\0' : v.back();
      const std::string digits = v.substr(0, v.empty() ? 0 : v.size() - 1);
      const bool numeric = !digits.empty() && digits.size() <= 12 &&
                           digits.find_first_not_of("0123456789") == std::string::npos;
      const long long n = numeric ? std::stoll(digits) : 0;
      if (!numeric || n <= 0 || (unit != 'M' && unit != 'G')) {
        return {false, "invalid pinned memory limit \"" + v + "\": want <N>M or <N>G, N > 0"};
      }
      pinned[uuid] = std::to_string(unit == 'G' ? n * 1024 : n) + "M";
      WriteSettings();
      return {true, ""};
    }
    return {false, "unknown command or wrong arguments: " + line};
  }
};

void OnSignal(int) { g_stop = 1; }

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Connects to the daemon's socket in the current directory; -1 with errno set when none.
int Connect() {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, kSocketName, sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

// The grandchild: serves until quit or SIGTERM. `ready` gets "R" once the socket listens, or an
// error text.
int Serve(Daemon& d, int ready) {
  auto fail = [&](const std::string& text) {
    ssize_t ignored = ::write(ready, text.data(), text.size());
    (void)ignored;
    return 1;
  };
  ::unlink(kSocketName);
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, kSocketName, sizeof(addr.sun_path) - 1);
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listener, 16) != 0) {
    return fail(std::string("cannot listen on ") + d.pipe_dir + "/" + kSocketName + ": " +
                std::strerror(errno));
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  {
    const std::string pid = std::to_string(::getpid()) + "\n";
    const int fd = ::open(kPidName, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ssize_t ignored = ::write(fd, pid.data(), pid.size());
      (void)ignored;
      ::close(fd);
    }
    const int shm = ::open(d.shm_marker.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (shm >= 0) {
      ::close(shm);
    } else {
      d.shm_marker.clear();
    }
  }
  d.WriteSettings();
  std::string devices;
  for (const std::string& v : d.visible) devices += (devices.empty() ? "" : ",") + v;
  d.Log("control daemon started" + std::string(d.multi_user ? " (multi-user)" : "") +
        ", pipe directory " + d.pipe_dir + ", devices " + (devices.empty() ? "all" : devices));
  fail("R");
  ::close(ready);
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0) {
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(null_fd, STDOUT_FILENO);
    ::dup2(null_fd, STDERR_FILENO);
  }
  bool quit = false;
  while (!quit && !g_stop) {
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, 500) <= 0) continue;
    const int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    std::string line;
    char ch;
    while (line.size() < 4096 && ::read(c, &ch, 1) == 1 && ch != '\n') line.push_back(ch);
    d.Log("command: " + line);
    const auto [ok, text] = d.Handle(line, &quit);
    if (!ok) d.Log("error: " + text);
    const std::string reply = std::string(ok ? "ok\n" : "error\n") + text;
    ssize_t ignored = ::write(c, reply.data(), reply.size());
    (void)ignored;
    ::close(c);
  }
  ::unlink(kSocketName);
  ::unlink(kPidName);
  if (!d.shm_marker.empty()) ::unlink(d.shm_marker.c_str());
  d.Log(quit ? "control daemon exiting (quit)" : "control daemon exiting (signal)");
  return 0;
}

int StartDaemon(bool multi_user) {
  Daemon d;
  d.multi_user = multi_user;
  d.pipe_dir = EnvOr("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps");
  d.log_dir = EnvOr("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps");
  for (const std::string* dir : {&d.pipe_dir, &d.log_dir}) {
    if (!MakeDirs(*dir)) {
      std::fprintf(stderr, "cannot create %s: %s\n", dir->c_str(), std::strerror(errno));
      return 1;
    }
  }
  d.pipe_dir = Absolute(d.pipe_dir);
  d.log_dir = Absolute(d.log_dir);
  std::string list = EnvOr("CUDA_VISIBLE_DEVICES", "");
  for (char& c : list) c = c == ',' ? ' ' : c;
  d.visible = Words(list);
  if (::chdir(d.pipe_dir.c_str()) != 0) {
    std::fprintf(stderr, "cannot enter %s: %s\n", d.pipe_dir.c_str(), std::strerror(errno));
    return 1;
  }
  if (const int fd = Connect(); fd >= 0) {
    ::close(fd);
    std::fprintf(stderr, "An instance of this daemon is already running (%s/%s)\n",
                 d.pipe_dir.c_str(), kSocketName);
    return 1;
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return 1;
  const pid_t child = ::fork();
  if (child < 0) return 1;
  if (child == 0) {
    ::close(pipe_fds[0]);
    ::setsid();
    const pid_t grandchild = ::fork();
    if (grandchild != 0) ::_exit(grandchild < 0 ? 1 : 0);
    d.shm_marker = EnvOr("MOCK_MPS_SHM_DIRECTORY", "/dev/shm") + "/nvidia-mps-control-daemon." +
                   std::to_string(::getpid());
    ::_exit(Serve(d, pipe_fds[1]));
  }
  ::close(pipe_fds[1]);
  const std::string answer = ReadAll(pipe_fds[0]);
  ::close(pipe_fds[0]);
  if (answer != "R") {
    std::fprintf(stderr, "control daemon failed to start: %s\n",
                 answer.empty() ? "it exited" : answer.c_str());
    return 1;
  }
  return 0;
}

int Client() {
  const std::string pipe_dir = EnvOr("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps");
  if (::chdir(pipe_dir.c_str()) != 0) {
    std::fprintf(stderr, "Cannot find MPS control daemon process (%s: %s)\n", pipe_dir.c_str(),
                 std::strerror(errno));
    return 1;
  }
  ::signal(SIGPIPE, SIG_IGN);
  int rc = 0;
  for (std::string line; std::getline(std::cin, line);) {
    if (Words(line).empty()) continue;
    const int fd = Connect();
    if (fd < 0) {
      std::fprintf(stderr, "Cannot find MPS control daemon process (%s/%s: %s)\n", pipe_dir.c_str(),
                   kSocketName, std::strerror(errno));
      return 1;
    }
    const std::string request = line + "\n";
    ssize_t ignored = ::write(fd, request.data(), request.size());
    (void)ignored;
    const std::string reply = ReadAll(fd);
    ::close(fd);
    const size_t nl = reply.find('\n');
    const std::string status = reply.substr(0, nl);
    const std::string text = nl == std::string::npos ? "" : reply.substr(nl + 1);
    if (status == "ok") {
      if (!text.empty()) std::printf("%s\n", text.c_str());
    } else {
      std::fprintf(stderr, "%s\n",
                   text.empty() ? "no answer from the control daemon" : text.c_str());
      rc = 1;
    }
    std::fflush(stdout);
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  bool daemon = false, multi_user = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-d") {
      daemon = true;
    } else if (a == "-M") {
      multi_user = true;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: nvidia-cuda-mps-control [-d [-M]]  (fake, for tests)\n");
      return 0;
    } else {
      std::fprintf(stderr, "unknown option %s\nusage: nvidia-cuda-mps-control [-d [-M]]\n",
                   a.c_str());
      return 1;
    }
  }
  if (multi_user && !daemon) {
    std::fprintf(stderr, "-M needs -d\n");
    return 1;
  }
  return daemon ? StartDaemon(multi_user) : Client();
}
