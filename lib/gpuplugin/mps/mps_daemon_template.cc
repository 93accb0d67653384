#include "lib/gpuplugin/mps/mps_daemon_template.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/k8s/yaml_json.h"

namespace dra::gpu {
namespace {

std::string JsonString(absl::string_view s) { return nlohmann::json(std::string(s)).dump(); }

// "" -> null, so that the key is left out.
std::string OptionalJsonString(absl::string_view s) { return s.empty() ? "null" : JsonString(s); }

}  // namespace

absl::StatusOr<std::string> SubstitutePlaceholders(
    absl::string_view text, const std::map<std::string, std::string>& values) {
  std::string out;
  out.reserve(text.size() + 1024);
  size_t pos = 0;
  while (true) {
    const size_t open = text.find("{{", pos);
    if (open == absl::string_view::npos) break;
    const size_t close = text.find("}}", open + 2);
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("template: unterminated placeholder at byte ", open));
    }
    const std::string key(text.substr(open + 2, close - open - 2));
    auto it = values.find(key);
    if (it == values.end()) {
      return absl::InvalidArgumentError(absl::StrCat("template: no value for {{", key, "}}"));
    }
    absl::StrAppend(&out, text.substr(pos, open - pos), it->second);
    pos = close + 2;
  }
  absl::StrAppend(&out, text.substr(pos));
  return out;
}

absl::StatusOr<nlohmann::json> RenderMpsDeployment(const MpsDeploymentParams& p) {
  std::vector<std::string> limits;
  for (const auto& [uuid, mib] : p.pinned_limits_mib) {
    limits.push_back(absl::StrCat(uuid, "=", mib, "M"));
  }
  nlohmann::json secrets = nullptr;
  if (!p.image_pull_secrets.empty()) {
    secrets = nlohmann::json::array();
    for (const std::string& s : p.image_pull_secrets) secrets.push_back({{"name", s}});
  }
  const std::map<std::string, std::string> values = {
      {"NAME", JsonString(p.name)},
      {"NAMESPACE", JsonString(p.ns)},
      {"ID", JsonString(p.id)},
      {"CLAIM_UID", JsonString(p.claim_uid)},
      {"NODE_NAME", JsonString(p.node_name)},
      {"SERVICE_ACCOUNT", OptionalJsonString(p.service_account)},
      {"IMAGE_PULL_SECRETS", secrets.dump()},
      {"IMAGE", JsonString(p.image)},
      {"IMAGE_PULL_POLICY", OptionalJsonString(p.image_pull_policy)},
      {"CUDA_VISIBLE_DEVICES", JsonString(absl::StrJoin(p.visible_devices, ","))},
      {"FEATURE_GATES", JsonString(p.feature_gates)},
      {"DAEMON_ARGS", JsonString(p.multi_user ? "-M" : "")},
      {"ACTIVE_THREAD_PERCENTAGE",
       JsonString(p.active_thread_percentage ? absl::StrCat(*p.active_thread_percentage) : "")},
      {"PINNED_DEVICE_MEM_LIMITS", JsonString(absl::StrJoin(limits, " "))},
      {"SHM_MOUNT_PATH", JsonString(p.shm_under_driver_root ? "/driver-root/dev/shm" : "/dev/shm")},
      {"HOST_DRIVER_ROOT", JsonString(p.host_driver_root)},
      {"SHM_DIR", JsonString(p.shm_dir)},
      {"PIPE_DIR", JsonString(p.pipe_dir)},
      {"LOG_DIR", JsonString(p.log_dir)},
  };
  absl::StatusOr<std::string> text = SubstitutePlaceholders(MpsDeploymentTemplate(), values);
  if (!text.ok()) return absl::InternalError(text.status().message());
  absl::StatusOr<nlohmann::json> object = k8s::YamlToJson(*text, {.drop_null_members = true});
  if (!object.ok()) {
    return absl::InternalError(
        absl::StrCat("MPS Deployment template: ", object.status().message()));
  }
  if (!object->is_object() || object->value("kind", "") != "Deployment") {
    return absl::InternalError("MPS Deployment template: not a Deployment");
  }
  return object;
}

}  // namespace dra::gpu
