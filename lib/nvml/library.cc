#include "lib/nvml/library.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/nvml/errors.h"

namespace dra::nvml::internal {
namespace {

// Resolves `name` into `slot`; records it in `missing` when it is required and absent.
template <typename Fn>
void Bind(void* handle, const char* name, Fn** slot, bool required,
          std::vector<std::string>* missing) {
  *slot = reinterpret_cast<Fn*>(::dlsym(handle, name));
  if (*slot == nullptr && required) missing->push_back(name);
}

void BindAll(void* h, Api* a, std::vector<std::string>* m) {
  constexpr bool kRequired = true;
  constexpr bool kOptional = false;
  Bind(h, "nvmlInit_v2", &a->init_v2, kRequired, m);
  Bind(h, "nvmlInitWithFlags", &a->init_with_flags, kRequired, m);
  Bind(h, "nvmlShutdown", &a->shutdown, kRequired, m);
  Bind(h, "nvmlErrorString", &a->error_string, kRequired, m);
  Bind(h, "nvmlSystemGetDriverVersion", &a->system_get_driver_version, kRequired, m);
  Bind(h, "nvmlDeviceGetCount_v2", &a->device_get_count, kRequired, m);
  Bind(h, "nvmlDeviceGetHandleByIndex_v2", &a->device_get_handle_by_index, kRequired, m);
  Bind(h, "nvmlDeviceGetName", &a->device_get_name, kRequired, m);
  Bind(h, "nvmlDeviceGetUUID", &a->device_get_uuid, kRequired, m);
  Bind(h, "nvmlDeviceGetMinorNumber", &a->device_get_minor_number, kRequired, m);

  Bind(h, "nvmlSystemGetCudaDriverVersion_v2", &a->system_get_cuda_driver_version, kOptional, m);
  Bind(h, "nvmlDeviceGetHandleByUUID", &a->device_get_handle_by_uuid, kOptional, m);
  Bind(h, "nvmlDeviceGetHandleByPciBusId_v2", &a->device_get_handle_by_pci_bus_id, kOptional, m);
  Bind(h, "nvmlDeviceGetIndex", &a->device_get_index, kOptional, m);
  Bind(h, "nvmlDeviceGetPciInfo_v3", &a->device_get_pci_info, kOptional, m);
  Bind(h, "nvmlDeviceGetMemoryInfo", &a->device_get_memory_info, kOptional, m);
  Bind(h, "nvmlDeviceGetMemoryInfo_v2", &a->device_get_memory_info_v2, kOptional, m);
  Bind(h, "nvmlDeviceGetArchitecture", &a->device_get_architecture, kOptional, m);
  Bind(h, "nvmlDeviceGetBrand", &a->device_get_brand, kOptional, m);
  Bind(h, "nvmlDeviceGetCudaComputeCapability", &a->device_get_cuda_compute_capability, kOptional,
       m);
  Bind(h, "nvmlDeviceGetAddressingMode", &a->device_get_addressing_mode, kOptional, m);
  Bind(h, "nvmlDeviceGetVirtualizationMode", &a->device_get_virtualization_mode, kOptional, m);
  Bind(h, "nvmlDeviceGetModuleId", &a->device_get_module_id, kOptional, m);
  Bind(h, "nvmlDeviceGetPersistenceMode", &a->device_get_persistence_mode, kOptional, m);
  Bind(h, "nvmlDeviceSetPersistenceMode", &a->device_set_persistence_mode, kOptional, m);
  Bind(h, "nvmlDeviceGetComputeMode", &a->device_get_compute_mode, kOptional, m);
  Bind(h, "nvmlDeviceSetComputeMode", &a->device_set_compute_mode, kOptional, m);
  Bind(h, "nvmlDeviceGetGpuFabricInfo", &a->device_get_gpu_fabric_info, kOptional, m);
  Bind(h, "nvmlDeviceGetGpuFabricInfoV", &a->device_get_gpu_fabric_info_v, kOptional, m);
  Bind(h, "nvmlDeviceIsMigDeviceHandle", &a->device_is_mig_device_handle, kOptional, m);
  Bind(h, "nvmlDeviceGetMigMode", &a->device_get_mig_mode, kOptional, m);
  Bind(h, "nvmlDeviceSetMigMode", &a->device_set_mig_mode, kOptional, m);
  Bind(h, "nvmlDeviceGetGpuInstanceProfileInfo", &a->device_get_gpu_instance_profile_info,
       kOptional, m);
  Bind(h, "nvmlDeviceGetGpuInstanceProfileInfoV", &a->device_get_gpu_instance_profile_info_v,
       kOptional, m);
  Bind(h, "nvmlDeviceGetGpuInstancePossiblePlacements_v2",
       &a->device_get_gpu_instance_possible_placements, kOptional, m);
  Bind(h, "nvmlDeviceGetGpuInstanceRemainingCapacity",
       &a->device_get_gpu_instance_remaining_capacity, kOptional, m);
  Bind(h, "nvmlDeviceCreateGpuInstance", &a->device_create_gpu_instance, kOptional, m);
  Bind(h, "nvmlDeviceCreateGpuInstanceWithPlacement", &a->device_create_gpu_instance_with_placement,
       kOptional, m);
  Bind(h, "nvmlDeviceGetGpuInstances", &a->device_get_gpu_instances, kOptional, m);
  Bind(h, "nvmlDeviceGetGpuInstanceById", &a->device_get_gpu_instance_by_id, kOptional, m);
  Bind(h, "nvmlGpuInstanceDestroy", &a->gpu_instance_destroy, kOptional, m);
  Bind(h, "nvmlGpuInstanceGetInfo", &a->gpu_instance_get_info, kOptional, m);
  Bind(h, "nvmlGpuInstanceGetComputeInstanceProfileInfo",
       &a->gpu_instance_get_compute_instance_profile_info, kOptional, m);
  Bind(h, "nvmlGpuInstanceGetComputeInstanceProfileInfoV",
       &a->gpu_instance_get_compute_instance_profile_info_v, kOptional, m);
  Bind(h, "nvmlGpuInstanceCreateComputeInstance", &a->gpu_instance_create_compute_instance,
       kOptional, m);
  Bind(h, "nvmlGpuInstanceGetComputeInstances", &a->gpu_instance_get_compute_instances, kOptional,
       m);
  Bind(h, "nvmlGpuInstanceGetComputeInstanceById", &a->gpu_instance_get_compute_instance_by_id,
       kOptional, m);
  Bind(h, "nvmlComputeInstanceDestroy", &a->compute_instance_destroy, kOptional, m);
  Bind(h, "nvmlComputeInstanceGetInfo_v2", &a->compute_instance_get_info, kOptional, m);
  Bind(h, "nvmlDeviceGetMaxMigDeviceCount", &a->device_get_max_mig_device_count, kOptional, m);
  Bind(h, "nvmlDeviceGetMigDeviceHandleByIndex", &a->device_get_mig_device_handle_by_index,
       kOptional, m);
  Bind(h, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
       &a->device_get_device_handle_from_mig_device_handle, kOptional, m);
  Bind(h, "nvmlDeviceGetGpuInstanceId", &a->device_get_gpu_instance_id, kOptional, m);
  Bind(h, "nvmlDeviceGetComputeInstanceId", &a->device_get_compute_instance_id, kOptional, m);
  Bind(h, "nvmlDeviceGetAttributes_v2", &a->device_get_attributes, kOptional, m);
  Bind(h, "nvmlEventSetCreate", &a->event_set_create, kOptional, m);
  Bind(h, "nvmlDeviceGetSupportedEventTypes", &a->device_get_supported_event_types, kOptional, m);
  Bind(h, "nvmlDeviceRegisterEvents", &a->device_register_events, kOptional, m);
  Bind(h, "nvmlEventSetWait_v2", &a->event_set_wait, kOptional, m);
  Bind(h, "nvmlEventSetFree", &a->event_set_free, kOptional, m);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Library>> Library::Open(const std::string& path) {
  ::dlerror();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = ::dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("dlopen ", path, ": ", reason != nullptr ? reason : "unknown error"));
  }
  std::unique_ptr<Library> library(new Library(handle, path));
  std::vector<std::string> missing;
  BindAll(handle, &library->api_, &missing);
  if (!missing.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": missing required NVML symbols: ", absl::StrJoin(missing, ", ")));
  }
  return library;
}

Library::~Library() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

bool Library::HasSymbol(const char* symbol) const { return ::dlsym(handle_, symbol) != nullptr; }

absl::Status Library::Check(abi::Return ret, std::string_view function) const {
  if (ret == abi::kSuccess) return absl::OkStatus();
  const char* text = api_.error_string(ret);
  return MakeNvmlError(static_cast<ReturnCode>(ret), function, text != nullptr ? text : "");
}

absl::Status Library::Missing(std::string_view function) const {
  return WithReturnCode(
      absl::UnimplementedError(absl::StrCat(absl::string_view(function.data(), function.size()),
                                            ": not supported by ", path_, " (symbol missing)")),
      ReturnCode::kFunctionNotFound);
}

}  // namespace dra::nvml::internal
