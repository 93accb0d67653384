#pragma once

// Where a kind lives in the Kubernetes REST API. Every typed object struct in lib/k8s carries one
// as `static constexpr ResourceInfo kResource`, which is all the generic client needs to build
// URLs.

#include "absl/strings/string_view.h"

namespace dra::k8s {

struct ResourceInfo {
  absl::string_view group;    // "" for the core group
  absl::string_view version;  // "v1"
  absl::string_view kind;     // "ResourceSlice"
  absl::string_view plural;   // "resourceslices"
  bool namespaced;
};

}  // namespace dra::k8s
