#include "lib/driverroot/discovery.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::driverroot {

const std::vector<std::string> kDriverBinaries = {"nvidia-smi",
                                                  "nvidia-debugdump",
                                                  "nvidia-persistenced",
                                                  "nvidia-cuda-mps-control",
                                                  "nvidia-cuda-mps-server",
                                                  "nvidia-imex",
                                                  "nvidia-imex-ctl"};

namespace {

constexpr absl::string_view kNvmlPrefix = "libnvidia-ml.so.";

// Entry names of a directory (plugin-view path); NotFound when it does not exist.
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoToStatus(errno, absl::StrCat("list ", dir));
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(d)) {
    absl::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// Resolve() that maps "does not exist" to nullopt and keeps other errors.
absl::StatusOr<std::optional<std::string>> ResolveIfExists(const DriverRoot& root,
                                                           const std::string& in_root) {
  absl::StatusOr<std::string> resolved = root.Resolve(in_root);
  if (absl::IsNotFound(resolved.status())) return std::optional<std::string>();
  if (!resolved.ok()) return resolved.status();
  return std::optional<std::string>(*resolved);
}

bool StatIs(const std::string& path, mode_t type) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && (st.st_mode & S_IFMT) == type;
}

// The library directories (and their vdpau subdirectories) that exist, each resolved directory
// once: pairs of (standard in-root name, resolved in-root path).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> LibraryDirs(
    const DriverRoot& root) {
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::string> seen;
  for (const std::string& base : kLibraryDirs) {
    for (const std::string& dir : {base, base + "/vdpau"}) {
      ASSIGN_OR_RETURN(std::optional<std::string> resolved, ResolveIfExists(root, dir));
      if (!resolved || !StatIs(root.Path(*resolved), S_IFDIR)) continue;
      if (seen.insert(*resolved).second) out.emplace_back(dir, *resolved);
    }
  }
  return out;
}

absl::Status AddLibraries(const DriverRoot& root, const std::string& version, DriverFiles& out) {
  const std::string suffix = absl::StrCat(".so.", version);
  ASSIGN_OR_RETURN(auto dirs, LibraryDirs(root));
  for (const auto& [dir, resolved_dir] : dirs) {
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(root.Path(resolved_dir)));
    // First the versioned files, then the links in the same directory that lead to one of them.
    std::set<std::string> targets;  // resolved in-root paths of the versioned files
    std::vector<std::pair<std::string, std::string>> candidates;  // (name, resolved)
    for (const std::string& name : names) {
      ASSIGN_OR_RETURN(std::optional<std::string> resolved,
                       ResolveIfExists(root, absl::StrCat(resolved_dir, "/", name)));
      if (!resolved || !StatIs(root.Path(*resolved), S_IFREG)) continue;
      if (absl::EndsWith(name, suffix)) {
        targets.insert(*resolved);
        out.libraries.push_back({root.Path(*resolved), absl::StrCat(dir, "/", name)});
        if (absl::StartsWith(name, "libcuda.so.")) out.libcuda_dir = dir;
      } else if (absl::StrContains(name, ".so")) {
        candidates.emplace_back(name, *resolved);
      }
    }
    for (const auto& [name, resolved] : candidates) {
      if (targets.contains(resolved)) {
        out.libraries.push_back({root.Path(resolved), absl::StrCat(dir, "/", name)});
      }
    }
  }
  return absl::OkStatus();
}

absl::Status AddFirmware(const DriverRoot& root, const std::string& version, DriverFiles& out) {
  std::set<std::string> seen;
  for (absl::string_view base : {"/lib/firmware/nvidia/", "/usr/lib/firmware/nvidia/"}) {
    const std::string dir = absl::StrCat(base, version);
    ASSIGN_OR_RETURN(std::optional<std::string> resolved_dir, ResolveIfExists(root, dir));
    if (!resolved_dir || !seen.insert(*resolved_dir).second) continue;
    if (!StatIs(root.Path(*resolved_dir), S_IFDIR)) continue;
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(root.Path(*resolved_dir)));
    for (const std::string& name : names) {
      if (!absl::StartsWith(name, "gsp") || !absl::EndsWith(name, ".bin")) continue;
      ASSIGN_OR_RETURN(std::optional<std::string> resolved,
                       ResolveIfExists(root, absl::StrCat(*resolved_dir, "/", name)));
      if (resolved && StatIs(root.Path(*resolved), S_IFREG)) {
        out.firmware.push_back({root.Path(*resolved), absl::StrCat(dir, "/", name)});
      }
    }
  }
  return absl::OkStatus();
}

absl::Status AddBinaries(const DriverRoot& root, DriverFiles& out) {
  for (const std::string& name : kDriverBinaries) {
    for (const std::string& dir : kBinaryDirs) {
      const std::string in_root = absl::StrCat(dir, "/", name);
      ASSIGN_OR_RETURN(std::optional<std::string> resolved, ResolveIfExists(root, in_root));
      if (resolved && StatIs(root.Path(*resolved), S_IFREG)) {
        out.binaries.push_back({root.Path(*resolved), in_root});
        break;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status AddIpc(const DriverRoot& root, DriverFiles& out) {
  for (absl::string_view socket : {"nvidia-persistenced/socket", "nvidia-fabricmanager/socket"}) {
    for (absl::string_view base : {"/run/", "/var/run/"}) {
      const std::string in_root = absl::StrCat(base, socket);
      ASSIGN_OR_RETURN(std::optional<std::string> resolved, ResolveIfExists(root, in_root));
      if (resolved && !StatIs(root.Path(*resolved), S_IFDIR)) {
        out.ipc.push_back({root.Path(*resolved), in_root});
        break;
      }
    }
  }
  ASSIGN_OR_RETURN(std::optional<std::string> mps, ResolveIfExists(root, "/tmp/nvidia-mps"));
  if (mps && StatIs(root.Path(*mps), S_IFDIR)) {
    out.ipc.push_back({root.Path(*mps), "/tmp/nvidia-mps"});
  }
  return absl::OkStatus();
}

bool ByContainerPath(const DriverFile& a, const DriverFile& b) {
  return a.container_path < b.container_path;
}

}  // namespace

absl::StatusOr<std::string> DetectDriverVersion(const DriverRoot& root) {
  ASSIGN_OR_RETURN(auto dirs, LibraryDirs(root));
  for (const auto& [dir, resolved_dir] : dirs) {
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(root.Path(resolved_dir)));
    for (const std::string& name : names) {
      absl::string_view version = name;
      if (absl::ConsumePrefix(&version, kNvmlPrefix) && absl::StrContains(version, '.')) {
        return std::string(version);
      }
    }
  }
  return absl::NotFoundError(absl::StrCat("detect driver version: no ", kNvmlPrefix,
                                          "<version> in the library directories under ",
                                          root.root()));
}

absl::StatusOr<DriverFiles> DiscoverDriverFiles(const DriverRoot& root,
                                                absl::string_view driver_version) {
  DriverFiles out;
  if (driver_version.empty()) {
    ASSIGN_OR_RETURN(out.driver_version, DetectDriverVersion(root));
  } else {
    out.driver_version = std::string(driver_version);
  }
  const std::string context = absl::StrCat("discover driver files under ", root.root());
  RETURN_IF_ERROR(Annotate(AddLibraries(root, out.driver_version, out), context));
  RETURN_IF_ERROR(Annotate(AddFirmware(root, out.driver_version, out), context));
  RETURN_IF_ERROR(Annotate(AddBinaries(root, out), context));
  RETURN_IF_ERROR(Annotate(AddIpc(root, out), context));
  ASSIGN_OR_RETURN(out.control_devices, ControlDeviceNodes(root));
  std::sort(out.libraries.begin(), out.libraries.end(), ByContainerPath);
  std::sort(out.firmware.begin(), out.firmware.end(), ByContainerPath);
  DRA_VLOG(2, "discovered driver files", "root", root.root(), "version", out.driver_version,
           "libraries", out.libraries.size(), "firmware", out.firmware.size(), "binaries",
           out.binaries.size(), "ipc", out.ipc.size(), "controlDevices",
           out.control_devices.size());
  return out;
}

}  // namespace dra::driverroot
