#include "lib/cdcontroller/render.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/json_access.h"

namespace dra::cdcontroller {
namespace {

std::string JsonString(absl::string_view s) { return nlohmann::json(std::string(s)).dump(); }

// Members whose value is null are left out (an optional field without a value).
void DropNulls(nlohmann::json& j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end();) {
      if (it->is_null()) {
        it = j.erase(it);
      } else {
        DropNulls(*it);
        ++it;
      }
    }
  } else if (j.is_array()) {
    for (nlohmann::json& e : j) DropNulls(e);
  }
}

absl::StatusOr<nlohmann::json> Render(absl::string_view what, absl::string_view tmpl,
                                      const std::map<std::string, std::string>& values) {
  absl::StatusOr<std::string> text = SubstitutePlaceholders(tmpl, values);
  if (!text.ok()) {
    return absl::InternalError(absl::StrCat(what, " template: ", text.status().message()));
  }
  absl::StatusOr<nlohmann::json> j = json_access::Parse(*text);
  if (!j.ok() || !j->is_object()) {
    return absl::InternalError(absl::StrCat(what, " template: not a JSON object"));
  }
  DropNulls(*j);
  return j;
}

}  // namespace

std::string DaemonObjectName(absl::string_view cd_uid) {
  return absl::StrCat("computedomain-daemon-", cd_uid);
}

absl::StatusOr<std::string> SubstitutePlaceholders(
    absl::string_view text, const std::map<std::string, std::string>& values) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == absl::string_view::npos) {
      absl::StrAppend(&out, text.substr(pos));
      return out;
    }
    size_t close = text.find("}}", open + 2);
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("unterminated placeholder at offset ", open));
    }
    const std::string key(text.substr(open + 2, close - open - 2));
    auto it = values.find(key);
    if (it == values.end()) {
      return absl::InvalidArgumentError(absl::StrCat("no value for placeholder {{", key, "}}"));
    }
    absl::StrAppend(&out, text.substr(pos, open - pos));
    out.append(it->second);
    pos = close + 2;
  }
}

absl::StatusOr<nlohmann::json> RenderDaemonSet(const k8s::ComputeDomain& cd,
                                               const ControllerConfig& c) {
  nlohmann::json secrets = nullptr;
  if (!c.image_pull_secrets.empty()) {
    secrets = nlohmann::json::array();
    for (const std::string& s : c.image_pull_secrets) secrets.push_back({{"name", s}});
  }
  const std::string name = DaemonObjectName(cd.metadata.uid);
  return Render("DaemonSet", DaemonSetTemplate(),
                {
                    {"NAME", JsonString(name)},
                    {"NAMESPACE", JsonString(c.driver_namespace)},
                    {"CD_UID", JsonString(cd.metadata.uid)},
                    {"IMAGE_PULL_SECRETS", secrets.dump()},
                    {"IMAGE", JsonString(c.image_name)},
                    {"IMAGE_PULL_POLICY", JsonString(c.image_pull_policy)},
                    {"LOG_VERBOSITY", JsonString(c.log_verbosity_cd_daemon)},
                    {"MAX_NODES", JsonString(absl::StrCat(c.max_nodes_per_imex_domain))},
                    {"FEATURE_GATES", JsonString(c.feature_gates_text)},
                    {"READINESS_PERIOD_SECONDS",
                     absl::StrCat(absl::ToInt64Seconds(c.daemon_readiness_period))},
                });
}

absl::StatusOr<nlohmann::json> RenderDaemonClaimTemplate(const k8s::ComputeDomain& cd,
                                                         const ControllerConfig& c) {
  return Render("daemon ResourceClaimTemplate", DaemonClaimTemplateTemplate(),
                {
                    {"NAME", JsonString(DaemonObjectName(cd.metadata.uid))},
                    {"NAMESPACE", JsonString(c.driver_namespace)},
                    {"CD_UID", JsonString(cd.metadata.uid)},
                });
}

absl::StatusOr<nlohmann::json> RenderWorkloadClaimTemplate(const k8s::ComputeDomain& cd,
                                                           const ControllerConfig& c) {
  std::string mode =
      cd.spec.channel.allocation_mode.empty() ? "Single" : cd.spec.channel.allocation_mode;
  if (c.host_managed()) mode = "Single";
  return Render("workload ResourceClaimTemplate", WorkloadClaimTemplateTemplate(),
                {
                    {"NAME", JsonString(cd.spec.channel.resource_claim_template_name)},
                    {"NAMESPACE", JsonString(cd.metadata.namespace_name)},
                    {"CD_UID", JsonString(cd.metadata.uid)},
                    {"ALLOCATION_MODE", JsonString(mode)},
                });
}

}  // namespace dra::cdcontroller
