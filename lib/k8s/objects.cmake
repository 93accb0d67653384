# Typed codecs for the Kubernetes objects the driver uses. Included from lib/k8s/CMakeLists.txt.
dra_library(k8s_objects
  SRCS
    json_decode.cc
    object_meta.cc
    objects_apps.cc
    objects_compute_domain.cc
    objects_coordination.cc
    objects_core.cc
    objects_resource.cc
    objects_resource_claim.cc
    quantity.cc
  DEPS
    dra_common
    nlohmann_json::nlohmann_json
    absl::function_ref absl::int128 absl::status absl::statusor absl::str_format absl::strings)

dra_test(k8s_quantity_test
  SRCS quantity_test.cc
  DEPS dra_k8s_objects)

dra_test(k8s_objects_test
  SRCS
    json_decode_test.cc
    object_meta_test.cc
    objects_apps_test.cc
    objects_compute_domain_test.cc
    objects_coordination_test.cc
    objects_core_test.cc
    objects_resource_claim_test.cc
    objects_resource_test.cc
  DEPS dra_k8s_objects)
