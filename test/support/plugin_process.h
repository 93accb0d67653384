#pragma once

// Runs the real gpu-kubelet-plugin binary (or, with `binary` and `driver_name` set, the
// compute-domain-kubelet-plugin, which takes the same flags used here) against a mock driver root
// and the local cluster, for integration tests and benchmarks: start, stop (SIGTERM or SIGKILL),
// and the DRA socket.

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "test/support/build_paths.h"
#include "test/support/cluster_env.h"

namespace dra::testing {

struct PluginProcessOptions {
  std::string binary = dra::testing::BinaryDir() + "/cmd/gpu-kubelet-plugin/gpu-kubelet-plugin";
  std::string node_name;
  std::string driver_root;  // a mock driver root (make-driver-root.sh)
  std::string work_dir;     // kubelet dirs, CDI root and the log live here
  std::vector<std::string> extra_args;
  std::string driver_name = "gpu.nvidia.com";  // names the plugin data directory
};

class PluginProcess {
 public:
  explicit PluginProcess(PluginProcessOptions o) : o_(std::move(o)) {
    std::system(("mkdir -p " + plugins_dir() + " " + registry_dir()).c_str());
  }
  ~PluginProcess() { Stop(SIGKILL); }

  std::string plugins_dir() const { return o_.work_dir + "/kubelet/plugins"; }
  std::string registry_dir() const { return o_.work_dir + "/kubelet/registry"; }
  std::string cdi_dir() const { return o_.work_dir + "/cdi"; }
  std::string data_dir() const { return plugins_dir() + "/" + o_.driver_name; }
  std::string socket() const { return data_dir() + "/dra.sock"; }
  std::string registration_socket() const {
    return registry_dir() + "/" + o_.driver_name + "-reg.sock";
  }
  std::string log() const { return o_.work_dir + "/plugin.log"; }
  pid_t pid() const { return pid_; }

  void Start() {
    std::vector<std::string> args = {o_.binary,
                                     "--node-name=" + o_.node_name,
                                     "--kubeconfig=" + AdminKubeconfig(),
                                     "--cdi-root=" + cdi_dir(),
                                     "--nvidia-driver-root=" + o_.driver_root,
                                     "--container-driver-root=" + o_.driver_root,
                                     "--proc-root=" + o_.driver_root + "/proc",
                                     "--kubelet-plugins-directory-path=" + plugins_dir(),
                                     "--kubelet-registrar-directory-path=" + registry_dir(),
                                     "--kube-api-qps=1000",
                                     "--kube-api-burst=1000"};
    args.insert(args.end(), o_.extra_args.begin(), o_.extra_args.end());
    // A socket left by a killed instance would make WaitForSocket return before the new one
    // listens (the plugin itself also removes it, later).
    unlink(socket().c_str());
    pid_ = fork();
    if (pid_ == 0) {
      std::freopen(log().c_str(), "a", stderr);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  // Stops the plugin with `signal` (SIGTERM: graceful; SIGKILL: a crash) and reaps it.
  void Stop(int signal = SIGTERM) {
    if (pid_ <= 0) return;
    kill(pid_, signal);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Waits until the DRA socket exists (the server is up).
  bool Connectable() const {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket().c_str(), sizeof(addr.sun_path) - 1);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    return ok;
  }
  // True once the DRA socket accepts a connection (its file exists from bind(), before the server
  // listens: a call in between is refused).
  bool WaitForSocket(int timeout_ms = 20000) const {
    for (int waited = 0; waited < timeout_ms; waited += 10) {
      if (access(socket().c_str(), F_OK) == 0 && Connectable()) return true;
      usleep(10000);
    }
    return false;
  }

 private:
  PluginProcessOptions o_;
  pid_t pid_ = -1;
};

}  // namespace dra::testing
