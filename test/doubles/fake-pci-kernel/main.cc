// fake-pci-kernel: the kernel's side of a fake host root's PCI sysfs files, answered from another
// process, for e2e tests whose plugin writes the files through a mount of the tree
// (test/e2e/gpu_vfio.bats). The semantics are dra::testing::FakeKernelSysfs's
// (test/doubles/testing/fake_pci_sysfs.h); this program only feeds it the writes it sees.
//
//   fake-pci-kernel --root <host root> --log <file> [--faults <file>]
//
// It watches (inotify, IN_CLOSE_WRITE) sys/bus/pci/devices/*/driver_override and
// sys/bus/pci/drivers/*/{bind,unbind}, driver directories made later (the fake modprobe)
// included. Differences from a kernel, which the tests must allow for:
//   - the write lands in a plain file and is applied once the writer has closed it, so the
//     writer sees the result a few milliseconds later (the plugin waits for the driver link after
//     each bind/unbind write; docs/vfio.md, "Waiting for the driver");
//   - a write the kernel would refuse (EBUSY, ENODEV, an injected fault) cannot fail for the
//     writer: it is logged and changes nothing, which the writer sees as a driver link that does
//     not change;
//   - the value is what the file holds after the write, read up to its first newline: a writer
//     that does not truncate (the plugin opens O_WRONLY, as for sysfs) and writes a shorter value
//     than the file's text leaves a tail behind; after each write the file is reset to the
//     kernel's text (driver_override: "(null)" or the driver; bind/unbind: empty), and the values
//     written are "\n", a driver name of at least 7 characters, or a PCI address.
// vfio-pci binds create dev/vfio/<group> as character device 1:3 (the numbers of /dev/null).
// Each write handled is one line of the log, "<file relative to root>=<value>", followed by
// " error: <message>" when it failed. --faults names a file of path suffixes, one a line, re-read
// at each write: a write to a matching file fails (EIO), as FakeKernelSysfs::FailWrites does.
// "ready" is logged once the watches are set. Stops on SIGTERM/SIGINT.

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "lib/common/atomic_file.h"
#include "test/doubles/testing/fake_pci_sysfs.h"

namespace {

namespace fs = std::filesystem;

class FakeKernel {
 public:
  FakeKernel(std::string root, const std::string& log, std::string faults)
      : root_(std::move(root)),
        faults_(std::move(faults)),
        log_(log, std::ios::app),
        sysfs_(root_) {
    sysfs_.MakeCharDevices(true);
  }

  bool Start() {
    fd_ = inotify_init1(IN_CLOEXEC);
    if (fd_ < 0 || !log_) return false;
    std::error_code ec;
    const fs::path drivers = fs::path(root_) / "sys/bus/pci/drivers";
    if (!Watch(drivers, IN_CREATE | IN_ONLYDIR)) return false;
    for (const auto& d : fs::directory_iterator(drivers, ec)) Watch(d.path(), IN_CLOSE_WRITE);
    for (const auto& d : fs::directory_iterator(fs::path(root_) / "sys/bus/pci/devices", ec)) {
      const fs::path file = d.path() / "driver_override";
      if (!fs::exists(file)) continue;
      kernel_text_[file.string()] = dra::ReadFile(file.string()).value_or("(null)\n");
      Watch(d.path(), IN_CLOSE_WRITE);
    }
    Log("ready");
    return true;
  }

  // Runs until the process is killed.
  int Loop() {
    alignas(inotify_event) char buf[64 * 1024];
    while (true) {
      const ssize_t n = read(fd_, buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR) continue;
        std::perror("fake-pci-kernel: read inotify");
        return 1;
      }
      for (char* p = buf; p < buf + n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(p);
        p += sizeof(inotify_event) + ev->len;
        if (ev->len == 0 || !dirs_.contains(ev->wd)) continue;
        const fs::path path = dirs_[ev->wd] / ev->name;
        if ((ev->mask & IN_CREATE) && (ev->mask & IN_ISDIR)) {
          Watch(path, IN_CLOSE_WRITE);
        } else if (ev->mask & IN_CLOSE_WRITE) {
          Handle(path);
        }
      }
    }
  }

 private:
  bool Watch(const fs::path& dir, uint32_t mask) {
    const int wd = inotify_add_watch(fd_, dir.c_str(), mask);
    if (wd < 0) {
      std::cerr << "fake-pci-kernel: watch " << dir << ": " << std::strerror(errno) << "\n";
      return false;
    }
    dirs_[wd] = dir;
    return true;
  }

  void Log(const std::string& line) { log_ << line << std::endl; }

  void LoadFaults() {
    sysfs_.ClearFailures();
    if (faults_.empty()) return;
    for (absl::string_view s : absl::StrSplit(dra::ReadFile(faults_).value_or(""), '\n')) {
      s = absl::StripAsciiWhitespace(s);
      if (!s.empty()) sysfs_.FailWrites(std::string(s), EIO);
    }
  }

  void Handle(const fs::path& path) {
    const std::string name = path.filename().string();
    const bool is_override = name == "driver_override";
    if (!is_override && name != "bind" && name != "unbind") return;
    const std::string text = dra::ReadFile(path.string()).value_or("");
    std::string value;
    if (is_override) {
      value = text.substr(0, text.find('\n'));
    } else {
      value = std::string(absl::StripAsciiWhitespace(text));
      if (value.empty()) return;  // opened and closed without a write, or our own reset
    }
    LoadFaults();
    sysfs_.writes.clear();
    const absl::Status s = sysfs_.Write(path.string(), is_override ? value + "\n" : value);
    std::string line = sysfs_.writes.empty() ? path.string() + "=" + value : sysfs_.writes.back();
    if (!s.ok()) line += " error: " + std::string(s.message());
    Log(line);
    // Back to the kernel's text.
    if (is_override) {
      if (s.ok()) {
        kernel_text_[path.string()] = dra::ReadFile(path.string()).value_or("(null)\n");
      } else {
        (void)dra::WriteFileAtomically(path.string(), kernel_text_[path.string()]);
      }
    } else {
      (void)dra::WriteFileAtomically(path.string(), "");
    }
  }

  const std::string root_;
  const std::string faults_;
  std::ofstream log_;
  dra::testing::FakeKernelSysfs sysfs_;
  int fd_ = -1;
  std::map<int, fs::path> dirs_;
  std::map<std::string, std::string> kernel_text_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string root, log, faults;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--root") {
      root = argv[i + 1];
    } else if (flag == "--log") {
      log = argv[i + 1];
    } else if (flag == "--faults") {
      faults = argv[i + 1];
    } else {
      std::cerr << "fake-pci-kernel: unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (root.empty() || log.empty()) {
    std::cerr << "usage: fake-pci-kernel --root <host root> --log <file> [--faults <file>]\n";
    return 2;
  }
  FakeKernel kernel(root, log, faults);
  if (!kernel.Start()) {
    std::cerr << "fake-pci-kernel: cannot watch " << root << " or open " << log << "\n";
    return 1;
  }
  return kernel.Loop();
}
