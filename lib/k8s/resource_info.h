#pragma once

// Where a kind lives in the Kubernetes REST API. Every typed object struct in lib/k8s carries one as
// `static constexpr ResourceInfo kResource`, which is all the generic client needs to build URLs.

#include <string_view>

namespace dra::k8s {

struct ResourceInfo {
  std::string_view group;    // "" for the core group
  std::string_view version;  // "v1"
  std::string_view kind;     // "ResourceSlice"
  std::string_view plural;   // "resourceslices"
  bool namespaced;
};

}  // namespace dra::k8s
