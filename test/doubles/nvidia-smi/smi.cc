#include "test/doubles/nvidia-smi/smi.h"

#include <strings.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "test/doubles/mock-nvml/caps_minors.h"

namespace fake_smi {
namespace {

constexpr const char* kDriverFailure =
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
    "the latest NVIDIA driver is installed and running.\n";

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string CudaVersionText(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace

int Smi::Init() {
  std::string error;
  if (!nvml_.Load(&error)) {
    std::fprintf(stderr, "%s", kDriverFailure);
    return 9;
  }
  const abi::Return ret = nvml_.init_with_flags(abi::kInitFlagNoGpus);
  if (ret != abi::kSuccess) {
    if (ret == abi::kErrorDriverNotLoaded) {
      std::fprintf(stderr, "%s", kDriverFailure);
      return 9;
    }
    return Fail("Failed to initialize NVML", ret);
  }
  initialized_ = true;
  dev_dir_ = DevDir();
  return 0;
}

Smi::~Smi() {
  if (initialized_) nvml_.shutdown();
}

int Smi::Fail(const std::string& what, abi::Return ret) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), nvml_.ErrorText(ret).c_str());
  return ret > 0 && ret < 256 ? ret : 255;
}

std::vector<Gpu> Smi::VisibleGpus() {
  std::vector<Gpu> out;
  unsigned int count = 0;
  if (nvml_.device_get_count(&count) != abi::kSuccess) return out;
  for (unsigned int i = 0; i < count; ++i) {
    Gpu gpu;
    char text[abi::kDeviceNameV2BufferSize];
    abi::PciInfo pci{};
    if (nvml_.device_get_handle_by_index(i, &gpu.handle) != abi::kSuccess ||
        nvml_.device_get_minor_number(gpu.handle, &gpu.minor) != abi::kSuccess ||
        !Exists(dev_dir_ + "/nvidia" + std::to_string(gpu.minor))) {
      continue;
    }
    if (nvml_.device_get_uuid(gpu.handle, text, sizeof(text)) == abi::kSuccess) gpu.uuid = text;
    if (nvml_.device_get_name(gpu.handle, text, sizeof(text)) == abi::kSuccess) gpu.name = text;
    if (nvml_.device_get_pci_info(gpu.handle, &pci) == abi::kSuccess) gpu.bus_id = pci.bus_id;
    gpu.index = static_cast<unsigned int>(out.size());
    out.push_back(gpu);
  }
  return out;
}

int Smi::Select(const std::string& ids, std::vector<Gpu>* out) {
  const std::vector<Gpu> all = VisibleGpus();
  out->clear();
  if (ids.empty()) {
    *out = all;
  } else {
    std::stringstream parts(ids);
    std::string id;
    while (std::getline(parts, id, ',')) {
      const Gpu* match = nullptr;
      for (const Gpu& gpu : all) {
        // A PCI id matches on its tail, so "18:00.0", "0000:18:00.0" and the full form all work.
        const bool pci =
            id.size() >= 7 && gpu.bus_id.size() >= id.size() &&
            strcasecmp(gpu.bus_id.c_str() + gpu.bus_id.size() - id.size(), id.c_str()) == 0;
        if (id == gpu.uuid || id == std::to_string(gpu.index) || pci) match = &gpu;
      }
      if (match == nullptr) {
        out->clear();
        break;
      }
      out->push_back(*match);
    }
  }
  if (out->empty()) {
    std::printf("No devices were found\n");
    return 6;
  }
  return 0;
}

std::vector<MigDevice> Smi::VisibleMigDevices(const Gpu& gpu) {
  std::vector<MigDevice> out;
  unsigned int max = 0;
  if (nvml_.device_get_max_mig_device_count == nullptr ||
      nvml_.device_get_mig_device_handle_by_index == nullptr ||
      nvml_.device_get_max_mig_device_count(gpu.handle, &max) != abi::kSuccess) {
    return out;
  }
  for (unsigned int i = 0; i < max; ++i) {
    abi::DeviceHandle mig = nullptr;
    unsigned int gi = 0, ci = 0;
    if (nvml_.device_get_mig_device_handle_by_index(gpu.handle, i, &mig) != abi::kSuccess ||
        nvml_.device_get_gpu_instance_id(mig, &gi) != abi::kSuccess ||
        nvml_.device_get_compute_instance_id(mig, &ci) != abi::kSuccess) {
      continue;
    }
    const std::string caps = dev_dir_ + "/nvidia-caps/nvidia-cap";
    if (!Exists(caps + std::to_string(mock_nvml::GiAccessMinor(gpu.minor, gi))) ||
        !Exists(caps + std::to_string(mock_nvml::CiAccessMinor(gpu.minor, gi, ci)))) {
      continue;
    }
    char text[abi::kDeviceNameV2BufferSize];
    MigDevice dev;
    dev.index = static_cast<unsigned int>(out.size());
    if (nvml_.device_get_name(mig, text, sizeof(text)) == abi::kSuccess) {
      const std::string name = text;  // "<GPU name> MIG 1g.5gb"
      const size_t at = name.rfind(" MIG ");
      dev.profile = at == std::string::npos ? name : name.substr(at + 5);
    }
    if (nvml_.device_get_uuid(mig, text, sizeof(text)) == abi::kSuccess) dev.uuid = text;
    out.push_back(dev);
  }
  return out;
}

int Smi::List() {
  const std::vector<Gpu> gpus = VisibleGpus();
  if (gpus.empty()) {
    std::printf("No devices were found\n");
    return 6;
  }
  for (const Gpu& gpu : gpus) {
    std::printf("GPU %u: %s (UUID: %s)\n", gpu.index, gpu.name.c_str(), gpu.uuid.c_str());
    for (const MigDevice& mig : VisibleMigDevices(gpu)) {
      std::printf("  MIG %-11s Device %2u: (UUID: %s)\n", mig.profile.c_str(), mig.index,
                  mig.uuid.c_str());
    }
  }
  return 0;
}

int Smi::Version() {
  char version[abi::kSystemDriverVersionBufferSize] = "";
  if (abi::Return ret = nvml_.system_get_driver_version(version, sizeof(version));
      ret != abi::kSuccess) {
    return Fail("Failed to read the driver version", ret);
  }
  int cuda = 0;
  if (nvml_.system_get_cuda_driver_version) nvml_.system_get_cuda_driver_version(&cuda);
  const std::string driver = version;
  const std::string branch = driver.substr(0, driver.rfind('.'));
  std::printf("NVIDIA-SMI version  : %s\n", driver.c_str());
  std::printf("NVML version        : %s\n", branch.c_str());
  std::printf("DRIVER version      : %s\n", driver.c_str());
  std::printf("CUDA Version        : %s\n", CudaVersionText(cuda).c_str());
  return 0;
}

int Smi::Summary() {
  char version[abi::kSystemDriverVersionBufferSize] = "";
  nvml_.system_get_driver_version(version, sizeof(version));
  int cuda = 0;
  if (nvml_.system_get_cuda_driver_version) nvml_.system_get_cuda_driver_version(&cuda);
  const std::string rule(89, '-');
  std::printf("+%s+\n", rule.c_str());
  std::printf("| NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: %-9s|\n", version, version,
              CudaVersionText(cuda).c_str());
  std::printf("+%s+\n", rule.c_str());
  const std::vector<Gpu> gpus = VisibleGpus();
  for (const Gpu& gpu : gpus) {
    std::printf("| %3u  %-40s %-20s %-20s |\n", gpu.index, gpu.name.c_str(), gpu.bus_id.c_str(),
                gpu.uuid.substr(0, 20).c_str());
  }
  if (gpus.empty()) std::printf("| %-87s |\n", "No devices were found");
  std::printf("+%s+\n", rule.c_str());
  return 0;
}

int Smi::InjectEvent(const std::string& uuid, const std::string& xid, const std::string& gi,
                     const std::string& ci) {
  if (nvml_.mock_inject_event == nullptr) {
    std::fprintf(stderr, "--mock-inject-xid needs the mock libnvidia-ml.so.1\n");
    return abi::kErrorNotSupported;
  }
  const abi::Return ret = nvml_.mock_inject_event(
      uuid.c_str(), abi::kEventTypeXidCriticalError, std::strtoull(xid.c_str(), nullptr, 10),
      gi.empty() ? 0xffffffffu : static_cast<unsigned int>(std::strtoul(gi.c_str(), nullptr, 10)),
      ci.empty() ? 0xffffffffu : static_cast<unsigned int>(std::strtoul(ci.c_str(), nullptr, 10)));
  if (ret != abi::kSuccess) return Fail("Failed to inject the event", ret);
  if (gi.empty()) {
    std::printf("Injected XID %s for GPU %s.\n", xid.c_str(), uuid.c_str());
  } else {
    std::printf("Injected XID %s for GPU %s, GPU instance %s, compute instance %s.\n", xid.c_str(),
                uuid.c_str(), gi.c_str(), ci.c_str());
  }
  return 0;
}

}  // namespace fake_smi
