#pragma once

// The fake nvidia-smi's view of NVML: libnvidia-ml.so.1 opened with dlopen and the entry points it
// calls, plus where the driver root's /dev is. It talks to whatever libnvidia-ml.so.1 it finds,
// so inside a container it sees the mock mounted there (docs/compatibility.md "Driver root": the
// product runs nvidia-smi from the driver root with LD_PRELOAD=<libnvidia-ml.so.1>).
//
// Library search order:
//   1. a libnvidia-ml.so.1 already in the process (LD_PRELOAD);
//   2. next to the executable: <exe dir>/../lib/x86_64-linux-gnu, ../lib/aarch64-linux-gnu,
//      ../lib64 and ../lib (so <root>/usr/bin/nvidia-smi finds <root>/usr/lib/...);
//   3. the dynamic loader's normal search ("libnvidia-ml.so.1").

#include <string>

#include "lib/nvml/nvml_abi.h"
#include "test/doubles/mock-nvml/mock_nvml_ext.h"

namespace fake_smi {

namespace abi = dra::nvml::abi;

struct NvmlClient {
  void* library = nullptr;
  std::string library_path;

  abi::InitWithFlagsFn* init_with_flags = nullptr;
  abi::ShutdownFn* shutdown = nullptr;
  abi::ErrorStringFn* error_string = nullptr;
  abi::SystemGetStringFn* system_get_driver_version = nullptr;
  abi::SystemGetCudaDriverVersionFn* system_get_cuda_driver_version = nullptr;
  abi::DeviceGetCountFn* device_get_count = nullptr;
  abi::DeviceGetHandleByIndexFn* device_get_handle_by_index = nullptr;
  abi::DeviceGetStringFn* device_get_name = nullptr;
  abi::DeviceGetStringFn* device_get_uuid = nullptr;
  abi::DeviceGetUintFn* device_get_minor_number = nullptr;
  abi::DeviceGetPciInfoFn* device_get_pci_info = nullptr;
  // Optional: null when the library lacks them.
  abi::DeviceGetMemoryInfoV2Fn* device_get_memory_info_v2 = nullptr;
  abi::DeviceGetIntFn* device_get_brand = nullptr;
  abi::DeviceGetUintFn* device_get_architecture = nullptr;
  abi::DeviceGetIntFn* device_get_persistence_mode = nullptr;
  abi::DeviceSetIntFn* device_set_persistence_mode = nullptr;
  abi::DeviceGetIntFn* device_get_compute_mode = nullptr;
  abi::DeviceSetIntFn* device_set_compute_mode = nullptr;
  abi::DeviceGetMigModeFn* device_get_mig_mode = nullptr;
  abi::DeviceGetUintFn* device_get_max_mig_device_count = nullptr;
  abi::DeviceGetMigDeviceHandleByIndexFn* device_get_mig_device_handle_by_index = nullptr;
  abi::DeviceGetUintFn* device_get_gpu_instance_id = nullptr;
  abi::DeviceGetUintFn* device_get_compute_instance_id = nullptr;
  mock_nvml::MockNvmlDeviceGetTimesliceFn* mock_get_timeslice = nullptr;
  mock_nvml::MockNvmlDeviceSetTimesliceFn* mock_set_timeslice = nullptr;
  mock_nvml::MockNvmlInjectEventFn* mock_inject_event = nullptr;

  // Opens the library (search order above) and resolves the symbols. False with `error` set when
  // no library loads or a required symbol is missing.
  bool Load(std::string* error);

  std::string ErrorText(abi::Return ret) const {
    return error_string ? error_string(ret) : "error " + std::to_string(ret);
  }
};

// The directory standing in for /dev: $MOCK_NVIDIA_SMI_DEV_DIR if set, else <root>/dev where root
// is the executable's directory minus /usr/bin, /usr/sbin, /bin, /sbin or /opt/bin ("/" when
// installed normally, the driver root for <driver root>/usr/bin/nvidia-smi).
std::string DevDir();

}  // namespace fake_smi
