# Device discovery: NVML + sysfs -> allocatable devices and their ResourceSlice form.
# Included from lib/gpu/CMakeLists.txt.
dra_library(gpu_inventory
  SRCS
    dynamic_mig_devices.cc
    inventory.cc
    mig_placement.cc
    mig_profile.cc
    sysfs.cc
  DEPS
    dra_nvml dra_k8s_objects dra_common absl::status absl::statusor absl::strings)

dra_test(gpu_inventory_test
  SRCS inventory_test.cc mig_profile_test.cc sysfs_test.cc
  DEPS dra_gpu_inventory dra_mock_driver_root nlohmann_json::nlohmann_json)
