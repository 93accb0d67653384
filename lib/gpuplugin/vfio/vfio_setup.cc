#include "lib/gpuplugin/vfio/vfio_setup.h"

#include <sys/utsname.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::gpu {

absl::StatusOr<std::unique_ptr<VfioRuntime>> VfioRuntime::Create(
    const std::string& host_root, const std::string& host_driver_root, Inventory& inventory,
    std::string kernel_release) {
  std::error_code ec;
  if (host_root.empty() || !std::filesystem::is_directory(host_root, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("host root is not mounted at \"", host_root,
                     "\" (--host-root, HOST_ROOT; needed by the feature gate PassthroughSupport)"));
  }
  if (!IommuEnabled(host_root)) {
    return absl::FailedPreconditionError(
        absl::StrCat("IOMMU is not enabled in the kernel (", host_root,
                     "/sys/kernel/iommu_groups is missing or empty; needed by the feature gate "
                     "PassthroughSupport)"));
  }
  if (kernel_release.empty()) {
    struct utsname u {};
    if (::uname(&u) == 0) kernel_release = u.release;
  }
  ASSIGN_OR_RETURN(std::vector<PciGpu> gpus, DiscoverPciGpus(host_root, kernel_release));
  ASSIGN_OR_RETURN(std::vector<VfioDevice> devices, VfioDevices(gpus, host_root));
  std::unique_ptr<VfioRuntime> r(new VfioRuntime());
  r->host_ = VfioHost{
      .host_root = host_root, .sysfs = &KernelSysfsWriter(), .run = ChrootCommand(host_root)};
  r->planning_.host = &r->host_;
  r->planning_.host_driver_root = host_driver_root;
  r->planning_.iommufd_available = IommufdAvailable(host_root);
  const size_t before = inventory.devices.size();
  AddVfioDevices(inventory, std::move(devices), &r->planning_);
  DRA_INFO("PassthroughSupport: VFIO devices announced", "devices",
           inventory.devices.size() - before, "pciGpus", gpus.size(), "iommufd",
           r->planning_.iommufd_available, "kernel", kernel_release);
  return r;
}

void VfioRuntime::SetPersistence(const NvidiaSmi* smi) {
  persistence_ = SmiPersistence(smi);
  host_.persistence = persistence_.get();
}

}  // namespace dra::gpu
