// A fake nvidia-imex for tests (see README.md in this directory): it forms the peer mesh an IMEX
// domain would form, over plain TCP, and answers nvidia-imex-ctl's readiness query. It shares no
// GPU memory and needs no driver.
//
//   nvidia-imex -c <config file>
//
// Runs in the foreground until SIGTERM or SIGINT (exit 0). SIGUSR1 re-reads the nodes file and
// re-resolves every entry. Exit 1 on a bad config or when the ports cannot be bound.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "test/doubles/imex/imex_config.h"

namespace {

using fake_imex::ImexConfig;
using Clock = std::chrono::steady_clock;

void Log(const std::string& msg) {
  std::fprintf(stderr, "nvidia-imex(fake)[%d]: %s\n", static_cast<int>(::getpid()), msg.c_str());
}

int Listen(const std::string& ip, int port, std::string* err) {
  sockaddr_in sa;
  if (!fake_imex::MakeSockaddr(ip, port, &sa)) {
    *err = "not an IPv4 address: " + ip;
    return -1;
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(fd, 64) != 0) {
    *err = "listen on " + ip + ":" + std::to_string(port) + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

// A listening unix socket at `path` (a stale socket file there is replaced), or -1.
int ListenUnix(const std::string& path, std::string* err) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof(sa.sun_path)) {
    *err = "unix socket path longer than " + std::to_string(sizeof(sa.sun_path) - 1) +
           " bytes: " + path;
    return -1;
  }
  path.copy(sa.sun_path, path.size());
  ::unlink(path.c_str());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(fd, 64) != 0) {
    *err = "listen on unix socket " + path + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

// One outgoing connection to a peer. States: idle (fd -1) -> connecting -> hello sent ->
// established (the peer answered "WELCOME <its ip>").
struct Outgoing {
  int fd = -1;
  bool connecting = false;
  bool established = false;
  std::string buffer;
  Clock::time_point next_try{};
};

// An accepted connection: a peer (after "HELLO <ip>") or a ctl query ("QUERY").
struct Incoming {
  std::string buffer;
  std::string peer_ip;  // set after HELLO
};

class FakeImex {
 public:
  explicit FakeImex(ImexConfig config) : config_(std::move(config)) {}

  int Run() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGPIPE);
    ::sigprocmask(SIG_BLOCK, &set, nullptr);
    sigfd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);

    LoadPeers();
    if (!ChooseSelf()) return 1;
    std::string err;
    peer_listen_ = Listen(self_ip_, config_.server_port, &err);
    if (peer_listen_ < 0) {
      Log("peer port: " + err);
      return 1;
    }
    std::string cmd_ip = config_.cmd_bind_ip.empty() ? "0.0.0.0" : config_.cmd_bind_ip;
    cmd_listen_ = Listen(cmd_ip, config_.cmd_port, &err);
    if (cmd_listen_ < 0) {
      Log("command port: " + err);
      return 1;
    }
    if (!config_.cmd_unix_path.empty()) {
      cmd_unix_listen_ = ListenUnix(config_.cmd_unix_path, &err);
      if (cmd_unix_listen_ < 0) {
        Log("command socket: " + err);
        return 1;
      }
    }
    Log("listening as " + self_ip_ + ":" + std::to_string(config_.server_port) + ", command port " +
        cmd_ip + ":" + std::to_string(config_.cmd_port) +
        (config_.cmd_unix_path.empty() ? "" : ", command socket " + config_.cmd_unix_path));
    for (;;) {
      TryConnects();
      if (!PollOnce()) break;
    }
    // The socket file goes with the daemon, as the real one's does: a later query fails to
    // connect instead of reaching nobody.
    if (cmd_unix_listen_ >= 0) ::unlink(config_.cmd_unix_path.c_str());
    Log("SIGTERM: exiting");
    return 0;
  }

 private:
  // Re-reads the nodes file; unresolvable entries are unused slots.
  void LoadPeers() {
    resolved_.clear();
    std::optional<std::string> text = fake_imex::ReadWholeFile(config_.node_config_file);
    if (!text) {
      Log("cannot read nodes file " + config_.node_config_file + "; no peers");
      return;
    }
    for (const std::string& name : fake_imex::ParseNodesFile(*text)) {
      if (std::optional<std::string> ip = fake_imex::ResolveIPv4(name)) {
        resolved_[*ip] = name;
      }
    }
  }

  // Own address: BIND_INTERFACE_IP, else IMEX_CMD_BIND_INTERFACE_IP, else the first resolved
  // node address that can be bound.
  bool ChooseSelf() {
    if (!config_.bind_ip.empty()) {
      self_ip_ = config_.bind_ip;
    } else if (!config_.cmd_bind_ip.empty() && config_.cmd_bind_ip != "0.0.0.0") {
      self_ip_ = config_.cmd_bind_ip;
    } else {
      for (const auto& [ip, name] : resolved_) {
        std::string err;
        int fd = Listen(ip, config_.server_port, &err);
        if (fd >= 0) {
          ::close(fd);
          self_ip_ = ip;
          break;
        }
      }
    }
    if (self_ip_.empty()) {
      Log("cannot tell my own address: no BIND_INTERFACE_IP, no IMEX_CMD_BIND_INTERFACE_IP and "
          "no bindable node in " +
          config_.node_config_file);
      return false;
    }
    UpdatePeerSet();
    return true;
  }

  void UpdatePeerSet() {
    std::set<std::string> peers;
    for (const auto& [ip, name] : resolved_) {
      if (ip != self_ip_) peers.insert(ip);
    }
    for (auto it = out_.begin(); it != out_.end();) {
      if (!peers.contains(it->first)) {
        if (it->second.fd >= 0) ::close(it->second.fd);
        it = out_.erase(it);
      } else {
        ++it;
      }
    }
    for (const std::string& ip : peers) out_.try_emplace(ip);
    std::string list;
    for (const std::string& ip : peers) list += " " + ip + "(" + resolved_[ip] + ")";
    Log("peers:" + (list.empty() ? std::string(" none") : list));
  }

  void Reset(Outgoing& o) {
    if (o.fd >= 0) ::close(o.fd);
    o = Outgoing{};
    o.next_try = Clock::now() + std::chrono::seconds(1);
  }

  void TryConnects() {
    Clock::time_point now = Clock::now();
    for (auto& [ip, o] : out_) {
      if (o.fd >= 0 || now < o.next_try) continue;
      sockaddr_in dst, src;
      fake_imex::MakeSockaddr(ip, config_.server_port, &dst);
      fake_imex::MakeSockaddr(self_ip_, 0, &src);
      o.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      (void)::bind(o.fd, reinterpret_cast<sockaddr*>(&src), sizeof(src));  // best effort
      int rc = ::connect(o.fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst));
      if (rc != 0 && errno != EINPROGRESS) {
        Reset(o);
        continue;
      }
      o.connecting = true;
    }
  }

  void SendHello(Outgoing& o) {
    std::string hello = "HELLO " + self_ip_ + "\n";
    if (::send(o.fd, hello.data(), hello.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(hello.size())) {
      Reset(o);
    }
  }

  // Returns false once a shutdown signal arrived.
  bool PollOnce() {
    std::vector<pollfd> fds;
    std::vector<std::string> owners;  // "sig", "peer", "cmd", "out:<ip>", "in"
    fds.push_back({sigfd_, POLLIN, 0});
    fds.push_back({peer_listen_, POLLIN, 0});
    fds.push_back({cmd_listen_, POLLIN, 0});
    if (cmd_unix_listen_ >= 0) fds.push_back({cmd_unix_listen_, POLLIN, 0});
    for (auto& [ip, o] : out_) {
      if (o.fd >= 0) fds.push_back({o.fd, static_cast<short>(o.connecting ? POLLOUT : POLLIN), 0});
    }
    for (auto& [fd, in] : in_) fds.push_back({fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 200);

    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      if (p.fd == sigfd_) {
        signalfd_siginfo si;
        while (::read(sigfd_, &si, sizeof(si)) == sizeof(si)) {
          if (si.ssi_signo == SIGUSR1) {
            Log("SIGUSR1: re-reading " + config_.node_config_file);
            LoadPeers();
            UpdatePeerSet();
          } else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
            return false;
          }
        }
      } else if (p.fd == peer_listen_ || p.fd == cmd_listen_ || p.fd == cmd_unix_listen_) {
        int fd;
        while ((fd = ::accept4(p.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          in_[fd] = Incoming{};
        }
      } else if (in_.contains(p.fd)) {
        HandleIncoming(p.fd);
      } else {
        for (auto& [ip, o] : out_) {
          if (o.fd == p.fd) HandleOutgoing(ip, o, p.revents);
        }
      }
    }
    return true;
  }

  void HandleOutgoing(const std::string& ip, Outgoing& o, short revents) {
    if (o.connecting) {
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(o.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0 || (revents & (POLLERR | POLLHUP))) {
        Reset(o);
        return;
      }
      o.connecting = false;
      SendHello(o);
      return;
    }
    char buf[256];
    ssize_t n = ::recv(o.fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      if (o.established) Log("lost connection to peer " + ip);
      Reset(o);
      return;
    }
    o.buffer.append(buf, static_cast<size_t>(n));
    if (!o.established && o.buffer.find('\n') != std::string::npos) {
      if (o.buffer.rfind("WELCOME ", 0) == 0) {
        o.established = true;
        Log("connected to peer " + ip);
      } else {
        Reset(o);
      }
    }
  }

  void HandleIncoming(int fd) {
    Incoming& in = in_[fd];
    char buf[256];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0 || in.buffer.size() > 4096) {
      if (!in.peer_ip.empty()) Log("peer " + in.peer_ip + " disconnected");
      ::close(fd);
      in_.erase(fd);
      return;
    }
    in.buffer.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = in.buffer.find('\n')) != std::string::npos) {
      std::string line = fake_imex::Trim(in.buffer.substr(0, nl));
      in.buffer.erase(0, nl + 1);
      if (line.rfind("HELLO ", 0) == 0) {
        in.peer_ip = fake_imex::Trim(line.substr(6));
        std::string answer = "WELCOME " + self_ip_ + "\n";
        ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
      } else if (line == "QUERY") {
        std::string answer = Readiness() + "\n";
        ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
        ::close(fd);
        in_.erase(fd);
        return;
      }
    }
  }

  // "READY", or "NOT_READY <peer> ..." listing the peers not connected both ways.
  std::string Readiness() const {
    std::set<std::string> inbound;
    for (const auto& [fd, in] : in_) {
      if (!in.peer_ip.empty()) inbound.insert(in.peer_ip);
    }
    std::string missing;
    for (const auto& [ip, o] : out_) {
      bool out_ok = o.established;
      bool in_ok = inbound.contains(ip);
      if (out_ok && in_ok) continue;
      auto name = resolved_.find(ip);
      missing += " " + (name == resolved_.end() ? ip : name->second) + "(" + ip + ":" +
                 (out_ok ? "" : "out") + (!out_ok && !in_ok ? "+" : "") + (in_ok ? "" : "in") + ")";
    }
    return missing.empty() ? "READY" : "NOT_READY" + missing;
  }

  ImexConfig config_;
  std::map<std::string, std::string> resolved_;  // ip -> nodes-file entry
  std::string self_ip_;
  std::map<std::string, Outgoing> out_;  // peer ip -> connection
  std::map<int, Incoming> in_;
  int sigfd_ = -1;
  int peer_listen_ = -1;
  int cmd_listen_ = -1;
  int cmd_unix_listen_ = -1;  // IMEX_CMD_UNIX_DOMAIN_PATH, when set
};

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "-c" || a == "--config") && i + 1 < argc) {
      config_path = argv[++i];
    } else if (a.rfind("--config=", 0) == 0) {
      config_path = a.substr(9);
    } else {
      std::fprintf(stderr, "nvidia-imex(fake): unknown argument %s; usage: nvidia-imex -c <file>\n",
                   a.c_str());
      return 2;
    }
  }
  if (config_path.empty()) {
    std::fprintf(stderr, "nvidia-imex(fake): usage: nvidia-imex -c <config file>\n");
    return 2;
  }
  std::string err;
  std::optional<ImexConfig> config = fake_imex::LoadImexConfig(config_path, &err);
  if (!config) {
    Log(err);
    return 1;
  }
  if (config->node_config_file.empty()) {
    Log(config_path + ": IMEX_NODE_CONFIG_FILE is not set");
    return 1;
  }
  return FakeImex(*config).Run();
}
