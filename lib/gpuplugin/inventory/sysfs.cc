#include "lib/gpuplugin/inventory/sysfs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "lib/common/status.h"

namespace dra::gpu {
namespace {

namespace fs = std::filesystem;

fs::path PciDevicePath(std::string_view sysfs_root, std::string_view pci_bus_id) {
  return fs::path(sysfs_root) / "bus" / "pci" / "devices" / fs::path(pci_bus_id);
}

bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// "pci<4 hex>:<2 hex>", the shape of a root complex directory under /sys/devices.
bool LooksLikePcieRoot(std::string_view s) {
  if (s.size() != 3 + 4 + 1 + 2 || s.substr(0, 3) != "pci" || s[7] != ':') return false;
  for (size_t i = 3; i < s.size(); ++i) {
    if (i != 7 && !IsHex(s[i])) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> NormalizePciBusId(std::string_view nvml_bus_id) {
  std::string id = absl::AsciiStrToLower(absl::string_view(nvml_bus_id.data(), nvml_bus_id.size()));
  // NVML pads the domain to 8 digits; the upper 16 bits are always zero on Linux.
  if (id.size() > 4 && id.compare(0, 4, "0000") == 0 && id.find(':') == 8) id.erase(0, 4);
  auto hex = [&id](size_t from, size_t n) {
    for (size_t i = from; i < from + n; ++i) {
      if (!absl::ascii_isxdigit(static_cast<unsigned char>(id[i]))) return false;
    }
    return true;
  };
  const bool ok = id.size() == 12 && id[4] == ':' && id[7] == ':' && id[10] == '.' && hex(0, 4) &&
                  hex(5, 2) && hex(8, 2) && hex(11, 1);
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("PCI bus id \"", absl::string_view(nvml_bus_id.data(), nvml_bus_id.size()),
                     "\" is not of the form 0000:65:00.0"));
  }
  return id;
}

absl::StatusOr<std::string> ReadPcieRoot(std::string_view sysfs_root, std::string_view pci_bus_id) {
  const fs::path link = PciDevicePath(sysfs_root, pci_bus_id);
  std::error_code ec;
  fs::path target = fs::read_symlink(link, ec);
  if (ec) {
    return dra::ErrnoToStatus(ec.value(), absl::StrCat("read link ", link.string()));
  }
  // sysfs links are relative ("../../../devices/..."); resolve lexically, as the kernel's layout
  // is what we want to read, not whatever a bind mount would make of it.
  if (target.is_relative()) target = link.parent_path() / target;
  target = target.lexically_normal();
  const fs::path devices = (fs::path(sysfs_root) / "devices").lexically_normal();
  const fs::path relative = target.lexically_relative(devices);
  if (relative.empty() || *relative.begin() == "..") {
    return absl::FailedPreconditionError(absl::StrCat(
        "link ", link.string(), " points to ", target.string(), ", outside ", devices.string()));
  }
  std::string root = relative.begin()->string();
  if (!LooksLikePcieRoot(root)) {
    return absl::FailedPreconditionError(absl::StrCat("link ", link.string(), " points to ",
                                                      target.string(), ": ", root,
                                                      " is not a PCIe root like pci0000:00"));
  }
  return root;
}

absl::StatusOr<std::optional<int>> ReadNumaNode(std::string_view sysfs_root,
                                                std::string_view pci_bus_id) {
  const fs::path path = PciDevicePath(sysfs_root, pci_bus_id) / "numa_node";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return std::optional<int>();
    return dra::ErrnoToStatus(err, absl::StrCat("open ", path.string()));
  }
  char buffer[64];
  const ssize_t n = ::read(fd, buffer, sizeof(buffer));
  const int read_errno = errno;
  ::close(fd);
  if (n < 0) return dra::ErrnoToStatus(read_errno, absl::StrCat("read ", path.string()));
  const std::string text(absl::StripAsciiWhitespace(absl::string_view(buffer, n)));
  int value = 0;
  const auto [end, parse_error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || parse_error != std::errc() || end != text.data() + text.size()) {
    return absl::DataLossError(
        absl::StrCat("read ", path.string(), ": \"", text, "\" is not an integer"));
  }
  if (value < 0) return std::optional<int>();
  return std::optional<int>(value);
}

}  // namespace dra::gpu
