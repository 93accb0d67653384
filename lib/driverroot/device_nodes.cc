#include "lib/driverroot/device_nodes.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "lib/common/atomic_file.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::driverroot {

const std::vector<std::string> kControlDeviceNodes = {
    "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"};

namespace {

// "00000000:65:00.0" (NVML) or "0000:65:00.0" -> "0000:65:00.0" (sysfs), lower-case.
std::string SysfsBusId(absl::string_view id) {
  std::string out = absl::AsciiStrToLower(id);
  const size_t colon = out.find(':');
  if (colon == 8 && absl::StartsWith(out, "0000")) out.erase(0, 4);
  return out;
}

// The value after "<key>:" on its own line of `text`.
std::optional<absl::string_view> Field(absl::string_view text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, key) && absl::ConsumePrefix(&line, ":")) {
      return absl::StripAsciiWhitespace(line);
    }
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<DeviceNodeInfo> StatDeviceNode(const DriverRoot& root, absl::string_view path) {
  const std::string host_path = root.DevPath(path);
  struct stat st;
  if (::stat(host_path.c_str(), &st) != 0) {
    return ErrnoToStatus(errno, absl::StrCat("stat device node ", host_path));
  }
  DeviceNodeInfo node;
  if (S_ISCHR(st.st_mode)) {
    node.type = 'c';
  } else if (S_ISBLK(st.st_mode)) {
    node.type = 'b';
  } else {
    return absl::FailedPreconditionError(
        absl::StrCat("device node ", host_path, " is not a character or block device"));
  }
  node.path = std::string(path);
  node.host_path = host_path;
  node.major = major(st.st_rdev);
  node.minor = minor(st.st_rdev);
  node.mode = st.st_mode & 07777;
  node.uid = st.st_uid;
  node.gid = st.st_gid;
  return node;
}

absl::StatusOr<std::vector<DeviceNodeInfo>> ControlDeviceNodes(const DriverRoot& root) {
  std::vector<DeviceNodeInfo> out;
  for (const std::string& path : kControlDeviceNodes) {
    absl::StatusOr<DeviceNodeInfo> node = StatDeviceNode(root, path);
    if (node.ok()) {
      out.push_back(std::move(*node));
    } else if (absl::IsFailedPrecondition(node.status())) {
      DRA_WARNING("skipping control device node", "path", root.DevPath(path), "err", node.status());
    } else if (!absl::IsNotFound(node.status())) {
      return node.status();
    }
  }
  return out;
}

absl::StatusOr<std::vector<DeviceNodeInfo>> GpuDeviceNodes(const DriverRoot& root,
                                                           unsigned gpu_minor,
                                                           absl::string_view pci_bus_id) {
  std::vector<DeviceNodeInfo> out;
  ASSIGN_OR_RETURN(DeviceNodeInfo gpu,
                   StatDeviceNode(root, absl::StrCat("/dev/nvidia", gpu_minor)));
  out.push_back(std::move(gpu));
  if (pci_bus_id.empty()) return out;

  const std::string drm_dir =
      absl::StrCat(root.sys_root(), "/bus/pci/devices/", SysfsBusId(pci_bus_id), "/drm");
  DIR* d = ::opendir(drm_dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return out;  // no display engine / DRM driver not loaded
    return ErrnoToStatus(errno, absl::StrCat("list ", drm_dir));
  }
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(d)) {
    absl::string_view name = entry->d_name;
    if (absl::StartsWith(name, "card") || absl::StartsWith(name, "renderD")) {
      names.emplace_back(name);
    }
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    absl::StatusOr<DeviceNodeInfo> node = StatDeviceNode(root, absl::StrCat("/dev/dri/", name));
    if (node.ok()) {
      out.push_back(std::move(*node));
    } else {
      DRA_WARNING("skipping DRM device node", "gpuMinor", gpu_minor, "name", name, "err",
                  node.status());
    }
  }
  return out;
}

absl::StatusOr<CapabilityFile> ParseCapabilityFile(absl::string_view text) {
  CapabilityFile out;
  std::optional<absl::string_view> minor = Field(text, "DeviceFileMinor");
  std::optional<absl::string_view> mode = Field(text, "DeviceFileMode");
  if (!minor || !absl::SimpleAtoi(*minor, &out.minor) || out.minor < 0) {
    return absl::InvalidArgumentError("no valid \"DeviceFileMinor:\" line");
  }
  if (!mode || !absl::SimpleAtoi(*mode, &out.mode) || out.mode > 07777) {
    return absl::InvalidArgumentError("no valid \"DeviceFileMode:\" line");
  }
  return out;
}

absl::StatusOr<int64_t> CharDeviceMajor(const DriverRoot& root, absl::string_view name) {
  const std::string& path = root.proc_devices();
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  bool in_char_section = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::EndsWith(line, "devices:")) {
      in_char_section = line == "Character devices:";
      continue;
    }
    if (!in_char_section) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    int64_t major = 0;
    if (fields.size() == 2 && fields[1] == name && absl::SimpleAtoi(fields[0], &major)) {
      return major;
    }
  }
  return absl::NotFoundError(absl::StrCat("no character device \"", name, "\" in ", path));
}

absl::StatusOr<std::vector<DeviceNodeInfo>> MigCapabilityDeviceNodes(const DriverRoot& root,
                                                                     unsigned gpu_minor,
                                                                     unsigned gi, unsigned ci) {
  ASSIGN_OR_RETURN(int64_t caps_major, CharDeviceMajor(root, "nvidia-caps"));
  const std::string gi_dir =
      absl::StrCat(root.proc_root(), "/driver/nvidia/capabilities/gpu", gpu_minor, "/mig/gi", gi);
  std::vector<DeviceNodeInfo> out;
  for (const std::string& file :
       {absl::StrCat(gi_dir, "/access"), absl::StrCat(gi_dir, "/ci", ci, "/access")}) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(file));
    absl::StatusOr<CapabilityFile> cap = ParseCapabilityFile(text);
    if (!cap.ok()) return Annotate(cap.status(), absl::StrCat("parse ", file));
    DeviceNodeInfo node;
    node.path = absl::StrCat("/dev/nvidia-caps/nvidia-cap", cap->minor);
    node.type = 'c';
    node.major = caps_major;
    node.minor = cap->minor;
    node.mode = cap->mode;
    out.push_back(std::move(node));
  }
  return out;
}

}  // namespace dra::driverroot
