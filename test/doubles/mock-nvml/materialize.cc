#include "test/doubles/mock-nvml/materialize.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "test/doubles/mock-nvml/caps_minors.h"
#include "test/doubles/mock-nvml/mig_logic.h"

namespace mock_nvml {
namespace {

class Writer {
 public:
  explicit Writer(std::string* error) : error_(error) {}

  void Note(const std::string& what) {
    if (error_->empty()) *error_ = what + ": " + std::strerror(errno);
  }

  bool MakeDirs(const std::string& path) {
    std::string partial;
    std::stringstream parts(path);
    std::string part;
    while (std::getline(parts, part, '/')) {
      partial += part + "/";
      if (part.empty()) continue;
      if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        Note("mkdir " + partial);
        return false;
      }
    }
    return true;
  }

  // Replaces `path` (atomically) when its contents differ.
  void WriteFile(const std::string& path, const std::string& contents) {
    std::ifstream in(path);
    if (in) {
      std::stringstream current;
      current << in.rdbuf();
      if (current.str() == contents) return;
    }
    if (!MakeDirs(path.substr(0, path.rfind('/')))) return;
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << contents;
      if (!out) {
        Note("write " + tmp);
        return;
      }
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) Note("rename " + tmp);
  }

  // A character device as root, else a placeholder regular file. Existing nodes are kept.
  void MakeCharDevice(const std::string& path, unsigned int major, unsigned int minor) {
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0) return;
    if (!MakeDirs(path.substr(0, path.rfind('/')))) return;
    if (::geteuid() == 0 && ::mknod(path.c_str(), S_IFCHR | 0666, makedev(major, minor)) == 0) {
      return;
    }
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
      Note("create " + path);
      return;
    }
    ::close(fd);
  }

  void RemoveTree(const std::string& path) {
    DIR* dir = ::opendir(path.c_str());
    if (dir != nullptr) {
      while (dirent* e = ::readdir(dir)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") RemoveTree(path + "/" + name);
      }
      ::closedir(dir);
      ::rmdir(path.c_str());
    } else {
      ::unlink(path.c_str());
    }
  }

 private:
  std::string* error_;
};

std::string CapabilityFile(unsigned int minor, unsigned int mode) {
  return "DeviceFileMinor: " + std::to_string(minor) + "\nDeviceFileMode: " + std::to_string(mode) +
         "\nDeviceFileModify: 1\n";
}

std::string LowerPciBusId(const GpuSpec& gpu) {
  char text[32];
  std::snprintf(text, sizeof(text), "%04x:%02x:%02x.0", gpu.pci_domain, gpu.pci_bus,
                gpu.pci_device);
  return text;
}

std::string ProcDevices() {
  std::string s = "Character devices:\n  1 mem\n  4 /dev/vc/0\n  4 tty\n  5 /dev/tty\n";
  s += std::to_string(kNvidiaMajor) + " nvidia\n";
  s += std::to_string(kNvidiaMajor) + " nvidia-modeset\n";
  s += std::to_string(kNvidiaMajor) + " nvidiactl\n";
  s += std::to_string(kNvidiaCapsMajor) + " nvidia-caps\n";
  s += std::to_string(kNvidiaCapsImexChannelsMajor) + " nvidia-caps-imex-channels\n";
  s += std::to_string(kNvidiaUvmMajor) + " nvidia-uvm\n";
  s += "\nBlock devices:\n  7 loop\n  8 sd\n";
  return s;
}

std::string GpuInformation(const NodeSpec& spec, const GpuSpec& gpu) {
  std::string s;
  s += "Model: \t\t " + gpu.name + "\n";
  s += "IRQ:   \t\t " + std::to_string(100 + gpu.minor) + "\n";
  s += "GPU UUID: \t " + gpu.uuid + "\n";
  s += "Video BIOS: \t ??.??.??.??.??\n";
  s += "Bus Type: \t PCIe\n";
  s += "DMA Size: \t 52 bits\n";
  s += "DMA Mask: \t 0xfffffffffffff\n";
  s += "Bus Location: \t " + LowerPciBusId(gpu) + "\n";
  s += "Device Minor: \t " + std::to_string(gpu.minor) + "\n";
  s += "GPU Firmware: \t " + spec.driver_version + "\n";
  s += "GPU Excluded:\t No\n";
  return s;
}

std::string MigMinors(const NodeSpec& spec) {
  std::string s = "config " + std::to_string(kCapsMigConfigMinor) + "\nmonitor " +
                  std::to_string(kCapsMigMonitorMinor) + "\n";
  std::set<unsigned int> minors;
  for (const GpuSpec& gpu : spec.gpus) minors.insert(gpu.minor);
  for (unsigned int g : minors) {
    for (unsigned int gi = 0; gi < kCapsGiSlotsPerGpu; ++gi) {
      const std::string prefix = "gpu" + std::to_string(g) + "/gi" + std::to_string(gi);
      s += prefix + "/access " + std::to_string(GiAccessMinor(g, gi)) + "\n";
      for (unsigned int ci = 0; ci + 1 < kCapsMinorsPerGi; ++ci) {
        s += prefix + "/ci" + std::to_string(ci) + "/access " +
             std::to_string(CiAccessMinor(g, gi, ci)) + "\n";
      }
    }
  }
  return s;
}

// Brings capabilities/gpu<minor>/mig in line with the GPU's instances; makes device nodes for the
// instances missing from `before` (every instance when it is null).
void SyncMigCapabilities(Writer& w, const std::string& root, const GpuSpec& gpu,
                         const GpuState* before, const GpuState& state) {
  const std::string dir =
      root + "/proc/driver/nvidia/capabilities/gpu" + std::to_string(gpu.minor) + "/mig";
  w.MakeDirs(dir);
  std::set<std::string> wanted;
  for (const GiState& gi : state.gis) {
    const std::string gi_name = "gi" + std::to_string(gi.id);
    wanted.insert(gi_name);
    const unsigned int gi_minor = GiAccessMinor(gpu.minor, gi.id);
    w.WriteFile(dir + "/" + gi_name + "/access", CapabilityFile(gi_minor, 0444));
    const GiState* old_gi = before ? FindGi(*before, gi.id) : nullptr;
    if (old_gi == nullptr) {
      w.MakeCharDevice(root + "/dev/nvidia-caps/nvidia-cap" + std::to_string(gi_minor),
                       kNvidiaCapsMajor, gi_minor);
    }
    std::set<std::string> wanted_cis = {"access"};
    for (const CiState& ci : gi.cis) {
      const std::string ci_name = "ci" + std::to_string(ci.id);
      wanted_cis.insert(ci_name);
      const unsigned int ci_minor = CiAccessMinor(gpu.minor, gi.id, ci.id);
      w.WriteFile(dir + "/" + gi_name + "/" + ci_name + "/access", CapabilityFile(ci_minor, 0444));
      if (old_gi == nullptr || FindCi(*old_gi, ci.id) == nullptr) {
        w.MakeCharDevice(root + "/dev/nvidia-caps/nvidia-cap" + std::to_string(ci_minor),
                         kNvidiaCapsMajor, ci_minor);
      }
    }
    if (DIR* d = ::opendir((dir + "/" + gi_name).c_str())) {
      std::set<std::string> stale;
      while (dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != ".." && wanted_cis.count(name) == 0) stale.insert(name);
      }
      ::closedir(d);
      for (const std::string& name : stale) w.RemoveTree(dir + "/" + gi_name + "/" + name);
    }
  }
  if (DIR* d = ::opendir(dir.c_str())) {
    std::set<std::string> stale;
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != ".." && wanted.count(name) == 0) stale.insert(name);
    }
    ::closedir(d);
    for (const std::string& name : stale) w.RemoveTree(dir + "/" + name);
  }
}

}  // namespace

void MaterializeDriverFiles(const std::string& root, const NodeSpec& spec, const State* before,
                            const State& state, std::string* error) {
  if (root.empty() || root == "/") return;
  Writer w(error);
  const std::string proc = root + "/proc/driver/nvidia";
  w.WriteFile(root + "/proc/devices", ProcDevices());
  w.WriteFile(proc + "/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  " +
                                     spec.driver_version + "  (mock-nvml)\n");
  bool any_mig = false;
  for (const GpuSpec& gpu : spec.gpus) {
    w.WriteFile(proc + "/gpus/" + LowerPciBusId(gpu) + "/information", GpuInformation(spec, gpu));
    if (!gpu.mig_table) continue;
    any_mig = true;
    auto it = state.gpus.find(gpu.uuid);
    if (it == state.gpus.end()) continue;
    const GpuState* old = nullptr;
    if (before != nullptr) {
      auto was = before->gpus.find(gpu.uuid);
      if (was != before->gpus.end()) old = &was->second;
    }
    // `old` is null for a new root and for a GPU new to the state: all its instances get nodes.
    SyncMigCapabilities(w, root, gpu, old, it->second);
  }
  // A node with NVLink fabric exposes the IMEX management capability (the compute-domain plugin
  // injects its node into the IMEX daemon's container).
  bool any_fabric = false;
  for (const GpuSpec& gpu : spec.gpus) any_fabric = any_fabric || gpu.fabric.has_value();
  if (any_fabric) {
    w.WriteFile(proc + "/capabilities/fabric-imex-mgmt",
                CapabilityFile(kCapsFabricImexMgmtMinor, 0400));
    w.MakeCharDevice(
        root + "/dev/nvidia-caps/nvidia-cap" + std::to_string(kCapsFabricImexMgmtMinor),
        kNvidiaCapsMajor, kCapsFabricImexMgmtMinor);
  }
  if (!any_mig) return;
  w.WriteFile(proc + "/capabilities/mig/config", CapabilityFile(kCapsMigConfigMinor, 0400));
  w.WriteFile(proc + "/capabilities/mig/monitor", CapabilityFile(kCapsMigMonitorMinor, 0444));
  w.WriteFile(root + "/proc/driver/nvidia-caps/mig-minors", MigMinors(spec));
  if (before == nullptr) {
    w.MakeCharDevice(root + "/dev/nvidia-caps/nvidia-cap" + std::to_string(kCapsMigConfigMinor),
                     kNvidiaCapsMajor, kCapsMigConfigMinor);
    w.MakeCharDevice(root + "/dev/nvidia-caps/nvidia-cap" + std::to_string(kCapsMigMonitorMinor),
                     kNvidiaCapsMajor, kCapsMigMonitorMinor);
  }
}

}  // namespace mock_nvml
