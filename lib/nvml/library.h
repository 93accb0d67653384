#pragma once

// Internal to lib/nvml: one dlopen'ed libnvidia-ml.so.1 and the entry points resolved from it.
// The facade (nvml.h) holds a Library and calls through api(); nothing outside lib/nvml includes
// this header.
//
// Thread-safety: immutable after Open, so any thread may call through it (NVML itself is
// thread-safe).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/nvml/nvml_abi.h"

namespace dra::nvml::internal {

// Resolved entry points. Required ones are never null after Open; optional ones are null when the
// library lacks the symbol (older drivers), and calls through the facade then fail with
// FUNCTION_NOT_FOUND (see Library::Missing).
struct Api {
  // Required.
  abi::InitV2Fn* init_v2 = nullptr;
  abi::InitWithFlagsFn* init_with_flags = nullptr;
  abi::ShutdownFn* shutdown = nullptr;
  abi::ErrorStringFn* error_string = nullptr;
  abi::SystemGetStringFn* system_get_driver_version = nullptr;
  abi::DeviceGetCountFn* device_get_count = nullptr;
  abi::DeviceGetHandleByIndexFn* device_get_handle_by_index = nullptr;
  abi::DeviceGetStringFn* device_get_name = nullptr;
  abi::DeviceGetStringFn* device_get_uuid = nullptr;
  abi::DeviceGetUintFn* device_get_minor_number = nullptr;
  // Optional.
  abi::SystemGetCudaDriverVersionFn* system_get_cuda_driver_version = nullptr;  // _v2
  abi::DeviceGetHandleByStringFn* device_get_handle_by_uuid = nullptr;
  abi::DeviceGetHandleByStringFn* device_get_handle_by_pci_bus_id = nullptr;  // _v2
  abi::DeviceGetUintFn* device_get_index = nullptr;
  abi::DeviceGetPciInfoFn* device_get_pci_info = nullptr;  // _v3
  abi::DeviceGetMemoryInfoFn* device_get_memory_info = nullptr;
  abi::DeviceGetMemoryInfoV2Fn* device_get_memory_info_v2 = nullptr;
  abi::DeviceGetUintFn* device_get_architecture = nullptr;
  abi::DeviceGetIntFn* device_get_brand = nullptr;
  abi::DeviceGetCudaComputeCapabilityFn* device_get_cuda_compute_capability = nullptr;
  abi::DeviceGetAddressingModeFn* device_get_addressing_mode = nullptr;
  abi::DeviceGetIntFn* device_get_virtualization_mode = nullptr;
  abi::DeviceGetUintFn* device_get_module_id = nullptr;
  abi::DeviceGetIntFn* device_get_persistence_mode = nullptr;
  abi::DeviceSetIntFn* device_set_persistence_mode = nullptr;
  abi::DeviceGetIntFn* device_get_compute_mode = nullptr;
  abi::DeviceSetIntFn* device_set_compute_mode = nullptr;
  abi::DeviceGetGpuFabricInfoFn* device_get_gpu_fabric_info = nullptr;
  abi::DeviceGetGpuFabricInfoVFn* device_get_gpu_fabric_info_v = nullptr;
  abi::DeviceGetUintFn* device_is_mig_device_handle = nullptr;
  abi::DeviceGetMigModeFn* device_get_mig_mode = nullptr;
  abi::DeviceSetMigModeFn* device_set_mig_mode = nullptr;
  abi::DeviceGetGpuInstanceProfileInfoFn* device_get_gpu_instance_profile_info = nullptr;
  abi::DeviceGetGpuInstanceProfileInfoVFn* device_get_gpu_instance_profile_info_v = nullptr;
  abi::DeviceGetGpuInstancePossiblePlacementsFn* device_get_gpu_instance_possible_placements =
      nullptr;  // _v2
  abi::DeviceGetGpuInstanceRemainingCapacityFn* device_get_gpu_instance_remaining_capacity =
      nullptr;
  abi::DeviceCreateGpuInstanceFn* device_create_gpu_instance = nullptr;
  abi::DeviceCreateGpuInstanceWithPlacementFn* device_create_gpu_instance_with_placement = nullptr;
  abi::DeviceGetGpuInstancesFn* device_get_gpu_instances = nullptr;
  abi::DeviceGetGpuInstanceByIdFn* device_get_gpu_instance_by_id = nullptr;
  abi::GpuInstanceDestroyFn* gpu_instance_destroy = nullptr;
  abi::GpuInstanceGetInfoFn* gpu_instance_get_info = nullptr;
  abi::GpuInstanceGetComputeInstanceProfileInfoFn* gpu_instance_get_compute_instance_profile_info =
      nullptr;
  abi::GpuInstanceGetComputeInstanceProfileInfoVFn*
      gpu_instance_get_compute_instance_profile_info_v = nullptr;
  abi::GpuInstanceCreateComputeInstanceFn* gpu_instance_create_compute_instance = nullptr;
  abi::GpuInstanceGetComputeInstancesFn* gpu_instance_get_compute_instances = nullptr;
  abi::GpuInstanceGetComputeInstanceByIdFn* gpu_instance_get_compute_instance_by_id = nullptr;
  abi::ComputeInstanceDestroyFn* compute_instance_destroy = nullptr;
  abi::ComputeInstanceGetInfoFn* compute_instance_get_info = nullptr;  // _v2
  abi::DeviceGetUintFn* device_get_max_mig_device_count = nullptr;
  abi::DeviceGetMigDeviceHandleByIndexFn* device_get_mig_device_handle_by_index = nullptr;
  abi::DeviceGetDeviceHandleFromMigDeviceHandleFn* device_get_device_handle_from_mig_device_handle =
      nullptr;
  abi::DeviceGetUintFn* device_get_gpu_instance_id = nullptr;
  abi::DeviceGetUintFn* device_get_compute_instance_id = nullptr;
  abi::DeviceGetAttributesFn* device_get_attributes = nullptr;  // _v2
  abi::EventSetCreateFn* event_set_create = nullptr;
  abi::DeviceGetSupportedEventTypesFn* device_get_supported_event_types = nullptr;
  abi::DeviceRegisterEventsFn* device_register_events = nullptr;
  abi::EventSetWaitFn* event_set_wait = nullptr;  // _v2
  abi::EventSetFreeFn* event_set_free = nullptr;
};

class Library {
 public:
  // dlopens `path` (RTLD_NOW | RTLD_LOCAL) and resolves every entry point of Api.
  // FailedPrecondition "dlopen <path>: <reason>" or "<path>: missing required NVML symbols: ...".
  static absl::StatusOr<std::unique_ptr<Library>> Open(const std::string& path);

  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library();  // dlclose

  const Api& api() const { return api_; }
  const std::string& path() const { return path_; }
  // Whether the library exports `symbol` (any symbol, not just those in Api).
  bool HasSymbol(const char* symbol) const;

  // OK for SUCCESS, else MakeNvmlError with this library's nvmlErrorString text.
  absl::Status Check(abi::Return ret, std::string_view function) const;
  // The error for an optional entry point the library lacks: FUNCTION_NOT_FOUND,
  // "<function>: not supported by <path> (symbol missing)".
  absl::Status Missing(std::string_view function) const;

 private:
  Library(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}

  void* handle_;
  std::string path_;
  Api api_;
};

}  // namespace dra::nvml::internal
