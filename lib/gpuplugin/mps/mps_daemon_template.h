#pragma once

// The Deployment of an MPS control daemon, from the template
// lib/gpuplugin/mps/mps_daemon_template.yaml (compiled in). Rendering substitutes JSON values for
// the template's {{KEY}} placeholders, parses the YAML and converts it to the JSON the API server
// takes. Values cannot change the document's structure; the caller validates them
// (MpsControlDaemon::Create) because the pod's script passes them on to a shell.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace dra::gpu {

// The template text as compiled in.
absl::string_view MpsDeploymentTemplate();

struct MpsDeploymentParams {
  std::string name;  // Deployment name, also the pods' "app" label
  std::string ns;
  std::string id;
  std::string claim_uid;
  std::string node_name;
  std::string image;
  std::string image_pull_policy;                // "" leaves the field out
  std::string service_account;                  // "" leaves the field out
  std::vector<std::string> image_pull_secrets;  // empty leaves the field out
  std::string host_driver_root;
  std::string shm_dir, pipe_dir, log_dir;  // host paths
  // Mount the shm dir at /driver-root/dev/shm (the driver root has a /dev/shm) or at /dev/shm.
  bool shm_under_driver_root = false;
  std::vector<std::string> visible_devices;  // CUDA_VISIBLE_DEVICES, in this order
  std::string feature_gates;
  bool multi_user = false;  // nvidia-cuda-mps-control -d -M
  std::optional<int64_t> active_thread_percentage;
  std::map<std::string, int64_t> pinned_limits_mib;  // uuid -> MiB
};

// The Deployment object. Errors (Internal) only for a broken template.
absl::StatusOr<nlohmann::json> RenderMpsDeployment(const MpsDeploymentParams& params);

// Substitutes `values` (each already a JSON text) for "{{KEY}}" in `text`. InvalidArgument for a
// placeholder without a value (or an unterminated one); unused values are fine.
absl::StatusOr<std::string> SubstitutePlaceholders(
    absl::string_view text, const std::map<std::string, std::string>& values);

}  // namespace dra::gpu
