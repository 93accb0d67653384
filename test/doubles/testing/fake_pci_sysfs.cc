#include "test/doubles/testing/fake_pci_sysfs.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "lib/common/atomic_file.h"
#include "lib/common/run_program.h"
#include "lib/common/status.h"

namespace dra::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kModprobe[] = R"(#!/bin/sh
# Fake modprobe: registers the module and its PCI driver in the fake host's sysfs.
set -e
[ -e "$HOST_ROOT/modprobe-fails" ] && { echo "modprobe: FATAL: Module $1 not found" >&2; exit 1; }
mkdir -p "$HOST_ROOT/sys/module/$1"
d=$(echo "$1" | tr _ -)
mkdir -p "$HOST_ROOT/sys/bus/pci/drivers/$d"
touch "$HOST_ROOT/sys/bus/pci/drivers/$d/bind" "$HOST_ROOT/sys/bus/pci/drivers/$d/unbind"
)";

constexpr char kFuser[] = R"(#!/bin/sh
# Fake fuser: exit 1 (nobody holds the file) unless fuser-holders lists PIDs.
if [ -e "$HOST_ROOT/fuser-holders" ]; then cat "$HOST_ROOT/fuser-holders"; exit 0; fi
exit 1
)";

absl::Status Errno(int err, const std::string& what) { return absl::ErrnoToStatus(err, what); }

absl::Status Put(const fs::path& p, const std::string& text) {
  RETURN_IF_ERROR(MakeDirectories(p.parent_path().string()));
  return WriteFileAtomically(p.string(), text);
}

absl::Status Link(const fs::path& target, const fs::path& link) {
  std::error_code ec;
  fs::remove(link, ec);
  fs::create_directory_symlink(target, link, ec);
  if (ec) return absl::InternalError(absl::StrCat("symlink ", link.string(), ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeFakePciHost(const std::string& root, const std::vector<FakePciGpu>& gpus,
                             const std::string& kernel_release, const std::string& modules_alias) {
  const fs::path r(root);
  RETURN_IF_ERROR(Put(r / "sys/module/nvidia/refcnt", "1\n"));
  RETURN_IF_ERROR(Put(r / "sys/bus/pci/drivers/nvidia/bind", ""));
  RETURN_IF_ERROR(Put(r / "sys/bus/pci/drivers/nvidia/unbind", ""));
  RETURN_IF_ERROR(Put(r / "lib/modules" / kernel_release / "modules.alias", modules_alias));
  RETURN_IF_ERROR(MakeDirectories((r / "dev/vfio").string()));
  RETURN_IF_ERROR(Put(r / "dev/vfio/vfio", ""));
  for (const auto& [name, text] : {std::pair{"modprobe", kModprobe}, {"fuser", kFuser}}) {
    RETURN_IF_ERROR(Put(r / "usr/sbin" / name, text));
    ::chmod((r / "usr/sbin" / name).c_str(), 0755);
  }
  for (const FakePciGpu& g : gpus) {
    const fs::path d = r / "sys/bus/pci/devices" / g.bus_id;
    RETURN_IF_ERROR(Put(d / "vendor", "0x10de\n"));
    RETURN_IF_ERROR(Put(d / "class", g.pci_class + "\n"));
    RETURN_IF_ERROR(Put(d / "device", g.device_id + "\n"));
    RETURN_IF_ERROR(Put(d / "modalias", g.modalias + "\n"));
    RETURN_IF_ERROR(Put(d / "numa_node", absl::StrCat(g.numa_node, "\n")));
    RETURN_IF_ERROR(Put(d / "sriov_numvfs", absl::StrCat(g.sriov_numvfs, "\n")));
    RETURN_IF_ERROR(Put(d / "sriov_totalvfs", absl::StrCat(g.sriov_numvfs, "\n")));
    RETURN_IF_ERROR(Put(d / "driver_override", "(null)\n"));
    const fs::path group = r / "sys/kernel/iommu_groups" / std::to_string(g.iommu_group);
    RETURN_IF_ERROR(MakeDirectories((group / "devices").string()));
    RETURN_IF_ERROR(Link(group, d / "iommu_group"));
    if (!g.driver.empty()) {
      RETURN_IF_ERROR(Link(r / "sys/bus/pci/drivers" / g.driver, d / "driver"));
    }
  }
  return absl::OkStatus();
}

absl::Status FakeKernelSysfs::Write(const std::string& path, absl::string_view value) const {
  std::string rel = path;
  if (absl::StartsWith(rel, root_ + "/")) rel = rel.substr(root_.size() + 1);
  const std::string v(absl::StripSuffix(value, "\n"));
  writes.push_back(rel + "=" + v);
  for (const auto& [suffix, err] : failures_) {
    if (absl::EndsWith(rel, suffix)) {
      return Errno(err, absl::StrCat("write \"", v, "\" to ", path));
    }
  }
  return WriteUnchecked(rel, v);
}

absl::Status FakeKernelSysfs::WriteUnchecked(const std::string& rel, const std::string& v) const {
  const fs::path r(root_);
  std::error_code ec;
  if (absl::StartsWith(rel, "sys/bus/pci/devices/") && absl::EndsWith(rel, "/driver_override")) {
    if (!fs::exists(r / rel)) return Errno(ENOENT, "open " + rel);
    return WriteFileAtomically((r / rel).string(), v.empty() ? "(null)\n" : v + "\n");
  }
  const std::string drivers = "sys/bus/pci/drivers/";
  if (!absl::StartsWith(rel, drivers)) return Errno(EACCES, "write " + rel + ": not a fake file");
  const std::string rest = rel.substr(drivers.size());
  const size_t slash = rest.find('/');
  const std::string driver = rest.substr(0, slash);
  const std::string op = rest.substr(slash + 1);
  if (!fs::is_directory(r / drivers / driver)) return Errno(ENOENT, "open " + rel);
  const fs::path dev = r / "sys/bus/pci/devices" / v;
  if (!fs::is_directory(dev)) return Errno(ENODEV, "write " + rel);
  const std::string current = fs::read_symlink(dev / "driver", ec).filename().string();
  const std::string group = fs::read_symlink(dev / "iommu_group", ec).filename().string();
  if (op == "unbind") {
    if (current != driver) return Errno(ENODEV, absl::StrCat("write \"", v, "\" to ", rel));
    fs::remove(dev / "driver", ec);
    if (driver == "vfio-pci") {
      fs::remove_all(dev / "vfio-dev", ec);
      fs::remove(r / "dev/vfio" / group, ec);
    }
    return absl::OkStatus();
  }
  if (op == "bind") {
    if (!current.empty()) return Errno(EBUSY, absl::StrCat("write \"", v, "\" to ", rel));
    absl::StatusOr<std::string> override_text = ReadFile((dev / "driver_override").string());
    const std::string ov(absl::StripSuffix(override_text.value_or("(null)\n"), "\n"));
    if (ov != "(null)" && ov != driver) {
      return Errno(ENODEV, absl::StrCat("write \"", v, "\" to ", rel));
    }
    RETURN_IF_ERROR(Link(r / drivers / driver, dev / "driver"));
    if (driver == "vfio-pci") {
      RETURN_IF_ERROR(MakeDirectories((dev / "vfio-dev" / ("vfio" + group)).string()));
      const fs::path node = r / "dev/vfio" / group;
      if (!char_devices_) {
        RETURN_IF_ERROR(WriteFileAtomically(node.string(), ""));
      } else if (fs::remove(node, ec); ::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
        return Errno(errno, "mknod " + node.string());
      }
    }
    return absl::OkStatus();
  }
  return Errno(EACCES, "write " + rel + ": not a fake file");
}

gpu::HostCommand FakeHostCommand(std::string root) {
  return [root = std::move(root)](const std::vector<std::string>& argv) {
    std::vector<std::string> full = argv;
    full[0] = root + "/usr/sbin/" + argv[0];
    return RunProgram(full, {.env = {{"HOST_ROOT", root}}});
  };
}

}  // namespace dra::testing
