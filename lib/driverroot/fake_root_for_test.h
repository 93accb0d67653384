#pragma once

// Test-only: builds a fake driver root in a temporary directory. Header-only, used by the tests
// of this folder.

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace dra::driverroot::test_util {

class FakeRoot {
 public:
  FakeRoot() {
    char tmpl[] = "/tmp/driverroot_test_XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) path_ = tmpl;
  }
  ~FakeRoot() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  FakeRoot(const FakeRoot&) = delete;
  FakeRoot& operator=(const FakeRoot&) = delete;

  const std::string& path() const { return path_; }
  std::string Abs(const std::string& in_root) const { return path_ + in_root; }

  void Dir(const std::string& in_root) const { std::filesystem::create_directories(Abs(in_root)); }
  void File(const std::string& in_root, const std::string& content = "", mode_t mode = 0644) const {
    Parent(in_root);
    std::ofstream(Abs(in_root)) << content;
    ::chmod(Abs(in_root).c_str(), mode);
  }
  void Symlink(const std::string& in_root, const std::string& target) const {
    Parent(in_root);
    std::filesystem::create_symlink(target, Abs(in_root));
  }
  // A listening-free unix socket file (bind only).
  void Socket(const std::string& in_root) const {
    Parent(in_root);
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, Abs(in_root).c_str(), sizeof(addr.sun_path) - 1);
    (void)::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));  // a socket file is enough
    ::close(fd);
  }
  // mknod a character device; false when not permitted (not root).
  bool CharDevice(const std::string& in_root, unsigned major, unsigned minor,
                  mode_t mode = 0666) const {
    Parent(in_root);
    if (::mknod(Abs(in_root).c_str(), S_IFCHR | 0600, makedev(major, minor)) != 0) return false;
    ::chmod(Abs(in_root).c_str(), mode);
    return true;
  }

 private:
  void Parent(const std::string& in_root) const {
    std::filesystem::create_directories(std::filesystem::path(Abs(in_root)).parent_path());
  }

  std::string path_;
};

// True when this process may create device nodes (tests that need them skip otherwise).
inline bool CanMknod() {
  FakeRoot probe;
  return probe.CharDevice("/probe", 1, 3);
}

}  // namespace dra::driverroot::test_util
