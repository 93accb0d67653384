#include "test/doubles/nvidia-smi/nvml_client.h"

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace fake_smi {
namespace {

std::string ExeDir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

template <typename Fn>
bool Resolve(void* library, const char* name, Fn** slot, bool required, std::string* error) {
  *slot = reinterpret_cast<Fn*>(::dlsym(library, name));
  if (*slot == nullptr && required) {
    *error = std::string("libnvidia-ml.so.1 lacks ") + name;
    return false;
  }
  return true;
}

}  // namespace

bool NvmlClient::Load(std::string* error) {
  std::vector<std::string> candidates;
  const std::string exe_dir = ExeDir();
  if (!exe_dir.empty()) {
    for (const char* dir :
         {"/../lib/x86_64-linux-gnu", "/../lib/aarch64-linux-gnu", "/../lib64", "/../lib"}) {
      candidates.push_back(exe_dir + dir + "/libnvidia-ml.so.1");
    }
  }
  library = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);  // LD_PRELOAD
  library_path = "libnvidia-ml.so.1 (preloaded)";
  for (size_t i = 0; library == nullptr && i < candidates.size(); ++i) {
    if (::access(candidates[i].c_str(), R_OK) != 0) continue;
    library = ::dlopen(candidates[i].c_str(), RTLD_NOW);
    library_path = candidates[i];
  }
  if (library == nullptr) {
    library = ::dlopen("libnvidia-ml.so.1", RTLD_NOW);
    library_path = "libnvidia-ml.so.1";
  }
  if (library == nullptr) {
    const char* reason = ::dlerror();
    *error = std::string("cannot load libnvidia-ml.so.1: ") + (reason ? reason : "not found");
    return false;
  }
  return Resolve(library, "nvmlInitWithFlags", &init_with_flags, true, error) &&
         Resolve(library, "nvmlShutdown", &shutdown, true, error) &&
         Resolve(library, "nvmlErrorString", &error_string, true, error) &&
         Resolve(library, "nvmlSystemGetDriverVersion", &system_get_driver_version, true, error) &&
         Resolve(library, "nvmlSystemGetCudaDriverVersion_v2", &system_get_cuda_driver_version,
                 false, error) &&
         Resolve(library, "nvmlDeviceGetCount_v2", &device_get_count, true, error) &&
         Resolve(library, "nvmlDeviceGetHandleByIndex_v2", &device_get_handle_by_index, true,
                 error) &&
         Resolve(library, "nvmlDeviceGetName", &device_get_name, true, error) &&
         Resolve(library, "nvmlDeviceGetUUID", &device_get_uuid, true, error) &&
         Resolve(library, "nvmlDeviceGetMinorNumber", &device_get_minor_number, true, error) &&
         Resolve(library, "nvmlDeviceGetPciInfo_v3", &device_get_pci_info, true, error) &&
         Resolve(library, "nvmlDeviceGetMemoryInfo_v2", &device_get_memory_info_v2, false, error) &&
         Resolve(library, "nvmlDeviceGetBrand", &device_get_brand, false, error) &&
         Resolve(library, "nvmlDeviceGetArchitecture", &device_get_architecture, false, error) &&
         Resolve(library, "nvmlDeviceGetPersistenceMode", &device_get_persistence_mode, false,
                 error) &&
         Resolve(library, "nvmlDeviceSetPersistenceMode", &device_set_persistence_mode, false,
                 error) &&
         Resolve(library, "nvmlDeviceGetComputeMode", &device_get_compute_mode, false, error) &&
         Resolve(library, "nvmlDeviceSetComputeMode", &device_set_compute_mode, false, error) &&
         Resolve(library, "nvmlDeviceGetMigMode", &device_get_mig_mode, false, error) &&
         Resolve(library, "nvmlDeviceGetMaxMigDeviceCount", &device_get_max_mig_device_count, false,
                 error) &&
         Resolve(library, "nvmlDeviceGetMigDeviceHandleByIndex",
                 &device_get_mig_device_handle_by_index, false, error) &&
         Resolve(library, "nvmlDeviceGetGpuInstanceId", &device_get_gpu_instance_id, false,
                 error) &&
         Resolve(library, "nvmlDeviceGetComputeInstanceId", &device_get_compute_instance_id, false,
                 error) &&
         Resolve(library, "mockNvmlDeviceGetTimeslice", &mock_get_timeslice, false, error) &&
         Resolve(library, "mockNvmlDeviceSetTimeslice", &mock_set_timeslice, false, error) &&
         Resolve(library, "mockNvmlInjectEvent", &mock_inject_event, false, error);
}

std::string DevDir() {
  if (const char* env = std::getenv("MOCK_NVIDIA_SMI_DEV_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  const std::string dir = ExeDir();
  for (const char* bin_dir : {"/usr/bin", "/usr/sbin", "/opt/bin", "/bin", "/sbin"}) {
    if (EndsWith(dir, bin_dir)) return dir.substr(0, dir.size() - std::strlen(bin_dir)) + "/dev";
  }
  return "/dev";
}

}  // namespace fake_smi
