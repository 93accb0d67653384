# The ResourceSlice publisher: generic (no GPU knowledge), depends only on lib/k8s.
dra_library(slice_publisher
  SRCS slice_publisher.cc
  DEPS dra_k8s dra_k8s_objects dra_common)

dra_test(slice_publisher_test SRCS slice_publisher_test.cc DEPS dra_slice_publisher)

dra_test(slice_publisher_integration_test
  SRCS slice_publisher_integration_test.cc
  DEPS dra_slice_publisher
  LABELS integration
  TIMEOUT 300)
