# Dynamic MIG (gate DynamicMIG) tests: the placement policy and its simulation table, the
# partitionable devices and counters. The code is in dra_gpu_inventory (inventory.cmake) and
# dra_gpu. Included from lib/gpu/CMakeLists.txt.
dra_test(gpu_mig_placement_test
  SRCS mig_placement_test.cc
  DEPS dra_gpu_inventory dra_mock_driver_root nlohmann_json::nlohmann_json absl::strings)

dra_test(gpu_dynamic_mig_test
  SRCS dynamic_mig_test.cc dynamic_mig_prepare_test.cc
  DEPS dra_gpu dra_mock_driver_root)
