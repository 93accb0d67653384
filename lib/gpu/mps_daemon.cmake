# The per-claim MPS control daemon (mps_daemon.h). Included from lib/gpu/CMakeLists.txt.

# The Deployment template is compiled in: its text becomes a raw string literal.
file(READ ${CMAKE_CURRENT_SOURCE_DIR}/mps_daemon_template.yaml DRA_MPS_TEMPLATE_TEXT)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_SOURCE_DIR}/mps_daemon_template.yaml)
configure_file(mps_daemon_template_text.cc.in
  ${CMAKE_CURRENT_BINARY_DIR}/mps_daemon_template_text.cc @ONLY)

dra_library(gpu_mps
  SRCS
    mps_daemon.cc
    mps_daemon_ready.cc
    mps_daemon_template.cc
    mps_host.cc
    ${CMAKE_CURRENT_BINARY_DIR}/mps_daemon_template_text.cc
  DEPS
    dra_api dra_cdi dra_k8s dra_k8s_objects dra_common OpenSSL::Crypto yaml-cpp
    nlohmann_json::nlohmann_json absl::status absl::statusor absl::strings absl::time)

dra_test(gpu_mps_daemon_test
  SRCS mps_daemon_test.cc
  DEPS dra_gpu_mps dra_mock_driver_root)

# Runs Start/AssertReady/Stop of a daemon for the integration test, inside a node's mount
# namespace (nsenter), as the plugin itself runs there.
add_executable(mps_daemon_node_tool mps_daemon_node_tool.cc)
target_include_directories(mps_daemon_node_tool PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(mps_daemon_node_tool PRIVATE dra_gpu_mps dra_mock_driver_root)

dra_test(gpu_mps_daemon_integration_test
  SRCS mps_daemon_integration_test.cc
  DEPS dra_gpu_mps dra_mock_driver_root
  LABELS integration
  TIMEOUT 300)
target_compile_definitions(gpu_mps_daemon_integration_test PRIVATE
  DRA_MPS_NODE_TOOL="$<TARGET_FILE:mps_daemon_node_tool>")
add_dependencies(gpu_mps_daemon_integration_test mps_daemon_node_tool)
