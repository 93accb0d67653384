#include "lib/gpuplugin/vfio/vfio_bind.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "lib/common/atomic_file.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/gpuplugin/vfio/vfio_pci.h"

namespace dra::gpu {
namespace {

namespace fs = std::filesystem;

class KernelWriter final : public SysfsWriter {
 public:
  absl::Status Write(const std::string& path, absl::string_view value) const override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
    const ssize_t n = ::write(fd, value.data(), value.size());
    const int err = errno;
    ::close(fd);
    if (n < 0) {
      return absl::ErrnoToStatus(
          err, absl::StrCat("write \"", absl::StripSuffix(value, "\n"), "\" to ", path));
    }
    return absl::OkStatus();
  }
};

class SmiPersistenceImpl final : public GpuPersistence {
 public:
  explicit SmiPersistenceImpl(const NvidiaSmi* smi) : smi_(smi) {}
  absl::Status Set(const std::string& bus_id, bool enabled) const override {
    return smi_->Run({"-i", bus_id, "-pm", enabled ? "1" : "0"}).status();
  }

 private:
  const NvidiaSmi* const smi_;
};

std::string DevicePath(const VfioHost& host, const std::string& bus_id, const char* file) {
  return absl::StrCat(host.host_root, "/sys/bus/pci/devices/", bus_id, "/", file);
}
std::string DriverPath(const VfioHost& host, const std::string& driver, const char* file) {
  return absl::StrCat(host.host_root, "/sys/bus/pci/drivers/", driver, "/", file);
}

absl::StatusOr<VfioTarget> TargetFromJson(const nlohmann::json& j, const std::string& step) {
  VfioTarget t;
  for (auto [key, out] : {std::pair<const char*, std::string*>{"busId", &t.bus_id},
                          {"module", &t.module},
                          {"nvidiaDevice", &t.nvidia_device}}) {
    if (!j.is_object() || !j.contains(key) || !j[key].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(step, " undo: ", key, ": expected a string"));
    }
    *out = j[key].get<std::string>();
  }
  if (t.bus_id.empty() || t.bus_id.find('/') != std::string::npos || t.module.empty() ||
      t.module.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(step, " undo: busId and module must be names without '/'"));
  }
  return t;
}

std::string DriverText(const std::string& driver) {
  return driver.empty() ? "no driver" : absl::StrCat("driver \"", driver, "\"");
}

// After `bus_id` was written to `file` (a driver's bind or unbind): waits, every
// driver_interval up to driver_timeout, until the GPU's driver link names `want` (empty: no
// link). Counted in sleeps, so that a test's fake sleep bounds it too.
absl::Status WaitForDriver(const VfioHost& host, const std::string& bus_id, const std::string& want,
                           const std::string& file) {
  absl::Duration waited;
  while (true) {
    const std::string now = PciDriver(host.host_root, bus_id);
    if (now == want) return absl::OkStatus();
    if (waited + host.driver_interval > host.driver_timeout) {
      return absl::DeadlineExceededError(absl::StrCat(
          "GPU \"", bus_id, "\" has ", DriverText(now), " ", absl::FormatDuration(waited),
          " after \"", bus_id, "\" was written to ", file, "; expected ", DriverText(want)));
    }
    if (host.sleep) {
      host.sleep(host.driver_interval);
    } else {
      absl::SleepFor(host.driver_interval);
    }
    waited += host.driver_interval;
  }
}

// Writes the bus id to a driver's bind or unbind file and waits for the driver link to show it.
absl::Status WriteAndWait(const VfioHost& host, const std::string& bus_id,
                          const std::string& driver, const char* op) {
  const std::string file = DriverPath(host, driver, op);
  RETURN_IF_ERROR(host.sysfs->Write(file, bus_id));
  return WaitForDriver(host, bus_id, std::string(op) == "bind" ? driver : "", file);
}

// Back on nvidia: clear driver_override, bind (when unbound).
absl::Status BindNvidia(const VfioHost& host, const std::string& bus_id) {
  const std::string driver = PciDriver(host.host_root, bus_id);
  if (driver == "nvidia") return absl::OkStatus();
  if (!driver.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", bus_id, " is bound to ", driver, "; it must be unbound before nvidia takes it"));
  }
  RETURN_IF_ERROR(host.sysfs->Write(DevicePath(host, bus_id, "driver_override"), "\n"));
  RETURN_IF_ERROR(WriteAndWait(host, bus_id, "nvidia", "bind"));
  DRA_INFO("GPU bound to nvidia", "pciBusID", bus_id);
  return absl::OkStatus();
}

// Off the vfio driver: unbind (when bound to it), clear driver_override.
absl::Status UnbindVfio(const VfioHost& host, const VfioTarget& t) {
  const std::string vfio = VfioDriverName(t.module);
  if (PciDriver(host.host_root, t.bus_id) == vfio) {
    RETURN_IF_ERROR(WriteAndWait(host, t.bus_id, vfio, "unbind"));
    DRA_INFO("GPU unbound from vfio", "pciBusID", t.bus_id, "driver", vfio);
  }
  return host.sysfs->Write(DevicePath(host, t.bus_id, "driver_override"), "\n");
}

// Waits until no process holds the GPU's device node: fuser exits 1 when none does.
absl::Status WaitUntilFree(const VfioHost& host, const VfioTarget& t, const Deadline& deadline) {
  // Counted in sleeps, so that a test's fake sleep bounds it too.
  const absl::Duration limit = std::min(host.free_timeout, deadline.Left());
  absl::Duration waited;
  std::string holders;
  while (true) {
    ASSIGN_OR_RETURN(ProgramResult r, host.run({"fuser", t.nvidia_device}));
    if (r.exit_code == 1) return absl::OkStatus();
    holders = std::string(absl::StripAsciiWhitespace(r.stdout_text));
    if (waited + host.free_interval > limit) break;
    if (host.sleep) {
      host.sleep(host.free_interval);
    } else {
      absl::SleepFor(host.free_interval);
    }
    waited += host.free_interval;
  }
  return absl::DeadlineExceededError(
      absl::StrCat("timed out waiting for gpu to be free: ", t.nvidia_device, " is held by PIDs ",
                   holders.empty() ? "(unknown)" : holders));
}

class VfioStep : public prepare::PlanStep {
 public:
  VfioStep(const char* name, VfioTarget target, const VfioHost* host)
      : name_(name), t_(std::move(target)), host_(*host) {}
  std::string name() const override { return name_; }
  nlohmann::json UndoData() const override {
    return {{"busId", t_.bus_id}, {"module", t_.module}, {"nvidiaDevice", t_.nvidia_device}};
  }
  bool external() const override { return true; }
  bool resumable() const override { return false; }

 protected:
  const char* const name_;
  const VfioTarget t_;
  const VfioHost& host_;
};

class ModuleStep final : public VfioStep {
 public:
  using VfioStep::VfioStep;
  absl::Status Apply(const Deadline& deadline) override {
    std::error_code ec;
    if (fs::is_directory(absl::StrCat(host_.host_root, "/sys/module/", t_.module), ec)) {
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(deadline.Check("load module " + t_.module));
    ASSIGN_OR_RETURN(ProgramResult r, host_.run({"modprobe", t_.module}));
    if (r.exit_code != 0) {
      return absl::FailedPreconditionError(absl::StrCat("modprobe ", t_.module, " failed (exit ",
                                                        r.exit_code, "): ", r.stderr_text));
    }
    DRA_INFO("loaded vfio module", "module", t_.module);
    return absl::OkStatus();
  }
};

class PersistenceStep final : public VfioStep {
 public:
  using VfioStep::VfioStep;
  absl::Status Apply(const Deadline& deadline) override {
    if (PciDriver(host_.host_root, t_.bus_id) != "nvidia") return absl::OkStatus();  // a retry
    RETURN_IF_ERROR(deadline.Check("turn persistence mode off"));
    return Annotate(host_.persistence->Set(t_.bus_id, false),
                    "turn persistence mode off for GPU " + t_.bus_id);
  }
};

class UnbindStep final : public VfioStep {
 public:
  using VfioStep::VfioStep;
  absl::Status Apply(const Deadline& deadline) override {
    const std::string vfio = VfioDriverName(t_.module);
    const std::string driver = PciDriver(host_.host_root, t_.bus_id);
    if (driver == vfio || driver.empty()) return absl::OkStatus();  // a retry
    if (driver != "nvidia") {
      return absl::FailedPreconditionError(
          absl::StrCat("GPU \"", t_.bus_id, "\" is bound to \"", driver,
                       "\" driver, expected \"nvidia\" or \"", vfio, "\""));
    }
    RETURN_IF_ERROR(WaitUntilFree(host_, t_, deadline));
    absl::StatusOr<std::string> numvfs = ReadFile(DevicePath(host_, t_.bus_id, "sriov_numvfs"));
    const std::string vfs(absl::StripAsciiWhitespace(numvfs.value_or("0")));
    if (vfs != "0" && !vfs.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("gpu has ", vfs, " VFs, cannot unbind"));
    }
    RETURN_IF_ERROR(host_.sysfs->Write(DevicePath(host_, t_.bus_id, "driver_override"), "\n"));
    RETURN_IF_ERROR(WriteAndWait(host_, t_.bus_id, "nvidia", "unbind"));
    DRA_INFO("GPU unbound from nvidia", "pciBusID", t_.bus_id);
    return absl::OkStatus();
  }
};

class BindStep final : public VfioStep {
 public:
  using VfioStep::VfioStep;
  absl::Status Apply(const Deadline& deadline) override {
    const std::string vfio = VfioDriverName(t_.module);
    if (PciDriver(host_.host_root, t_.bus_id) == vfio) return absl::OkStatus();
    RETURN_IF_ERROR(deadline.Check("bind to " + vfio));
    absl::Status s = host_.sysfs->Write(DevicePath(host_, t_.bus_id, "driver_override"), vfio);
    if (s.ok()) s = WriteAndWait(host_, t_.bus_id, vfio, "bind");
    if (!s.ok()) {
      // Leave nothing: the engine undoes the earlier steps only.
      const absl::Status undo = UnbindVfio(host_, t_);
      if (!undo.ok())
        s = Annotate(s, absl::StrCat("and clearing driver_override failed: ", undo.message()));
      return s;
    }
    DRA_INFO("GPU bound to vfio", "pciBusID", t_.bus_id, "driver", vfio);
    return absl::OkStatus();
  }
};

}  // namespace

const SysfsWriter& KernelSysfsWriter() {
  static const KernelWriter* const kWriter = new KernelWriter();
  return *kWriter;
}

HostCommand ChrootCommand(std::string host_root, absl::Duration timeout) {
  return [host_root = std::move(host_root), timeout](const std::vector<std::string>& argv) {
    std::vector<std::string> full = {"/usr/sbin/chroot", host_root};
    full.insert(full.end(), argv.begin(), argv.end());
    return RunProgram(full, {.timeout = timeout});
  };
}

std::unique_ptr<GpuPersistence> SmiPersistence(const NvidiaSmi* smi) {
  return std::make_unique<SmiPersistenceImpl>(smi);
}

std::string PciDriver(const std::string& host_root, const std::string& bus_id) {
  std::error_code ec;
  const fs::path target =
      fs::read_symlink(absl::StrCat(host_root, "/sys/bus/pci/devices/", bus_id, "/driver"), ec);
  return ec ? std::string() : target.filename().string();
}

std::vector<std::unique_ptr<prepare::PlanStep>> VfioBindSteps(const VfioTarget& target,
                                                              const VfioHost* host) {
  std::vector<std::unique_ptr<prepare::PlanStep>> steps;
  steps.push_back(std::make_unique<ModuleStep>(kVfioModuleStep, target, host));
  steps.push_back(std::make_unique<PersistenceStep>(kVfioPersistenceStep, target, host));
  steps.push_back(std::make_unique<UnbindStep>(kVfioUnbindStep, target, host));
  steps.push_back(std::make_unique<BindStep>(kVfioBindStep, target, host));
  return steps;
}

void AddVfioUndoers(const VfioHost* host, prepare::StepUndoers& undoers) {
  undoers[kVfioModuleStep] = [](const nlohmann::json& undo) {
    return TargetFromJson(undo, kVfioModuleStep).status();
  };
  undoers[kVfioPersistenceStep] = [host](const nlohmann::json& undo) -> absl::Status {
    ASSIGN_OR_RETURN(VfioTarget t, TargetFromJson(undo, kVfioPersistenceStep));
    // Only a GPU on nvidia has a persistence mode (the unbind undo ran first).
    if (PciDriver(host->host_root, t.bus_id) != "nvidia") {
      return absl::FailedPreconditionError(
          absl::StrCat("GPU ", t.bus_id, " is not on nvidia; cannot turn persistence mode on"));
    }
    return Annotate(host->persistence->Set(t.bus_id, true),
                    "turn persistence mode on for GPU " + t.bus_id);
  };
  undoers[kVfioUnbindStep] = [host](const nlohmann::json& undo) -> absl::Status {
    ASSIGN_OR_RETURN(VfioTarget t, TargetFromJson(undo, kVfioUnbindStep));
    return Annotate(BindNvidia(*host, t.bus_id), "bind GPU back to nvidia");
  };
  undoers[kVfioBindStep] = [host](const nlohmann::json& undo) -> absl::Status {
    ASSIGN_OR_RETURN(VfioTarget t, TargetFromJson(undo, kVfioBindStep));
    return Annotate(UnbindVfio(*host, t), "unbind GPU from vfio");
  };
}

}  // namespace dra::gpu
