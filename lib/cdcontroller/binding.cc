#include "lib/cdcontroller/binding.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "lib/k8s/objects_compute_domain.h"

namespace dra::cdcontroller {
namespace {

constexpr absl::string_view kDriver = k8s::kComputeDomainDriverName;

// The request name without a subrequest ("req/sub" -> "req").
absl::string_view ParentRequest(absl::string_view request) {
  size_t slash = request.find('/');
  return slash == absl::string_view::npos ? request : request.substr(0, slash);
}

// The domainID of the ComputeDomainChannelConfig that applies to `request` (a config with no
// requests applies to all); the last one wins, as configs are applied in order.
std::string ChannelDomainId(const k8s::AllocationResult& allocation, absl::string_view request) {
  std::string out;
  for (const k8s::DeviceAllocationConfiguration& c : allocation.devices.config) {
    if (!c.opaque.has_value() || c.opaque->driver != kDriver) continue;
    const nlohmann::json& p = c.opaque->parameters;
    if (!p.is_object() || !p.contains("kind") || p["kind"] != "ComputeDomainChannelConfig" ||
        !p.contains("domainID") || !p["domainID"].is_string()) {
      continue;
    }
    const bool applies =
        c.requests.empty() ||
        std::any_of(c.requests.begin(), c.requests.end(), [&](const std::string& r) {
          return r == request || r == ParentRequest(request);
        });
    if (applies) out = p["domainID"].get<std::string>();
  }
  return out;
}

bool ConditionTrue(const nlohmann::json& conditions, const std::string& type) {
  if (!conditions.is_array()) return false;
  for (const nlohmann::json& c : conditions) {
    if (c.is_object() && c.value("type", "") == type && c.value("status", "") == "True") {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string AllocationNode(const k8s::AllocationResult& allocation) {
  const nlohmann::json& selector = allocation.node_selector;
  if (!selector.is_object() || !selector.contains("nodeSelectorTerms") ||
      !selector["nodeSelectorTerms"].is_array()) {
    return "";
  }
  for (const nlohmann::json& term : selector["nodeSelectorTerms"]) {
    if (!term.is_object() || !term.contains("matchFields") || !term["matchFields"].is_array()) {
      continue;
    }
    for (const nlohmann::json& f : term["matchFields"]) {
      if (f.is_object() && f.value("key", "") == "metadata.name" &&
          f.value("operator", "") == "In" && f.contains("values") && f["values"].is_array() &&
          f["values"].size() == 1 && f["values"][0].is_string()) {
        return f["values"][0].get<std::string>();
      }
    }
  }
  return "";
}

std::optional<BindingClaim> BindingClaimOf(const k8s::ResourceClaim& claim) {
  if (!claim.status.allocation.has_value()) return std::nullopt;
  const k8s::AllocationResult& allocation = *claim.status.allocation;
  const std::string node = AllocationNode(allocation);
  BindingClaim out;
  for (const k8s::DeviceRequestAllocationResult& r : allocation.devices.results) {
    if (r.driver != kDriver || r.binding_conditions.empty()) continue;
    BindingDevice d{.pool = r.pool,
                    .device = r.device,
                    .node = node.empty() ? r.pool : node,
                    .conditions = r.binding_conditions,
                    .failure_conditions = r.binding_failure_conditions};
    for (const k8s::AllocatedDeviceStatus& s : claim.status.devices) {
      if (s.driver == r.driver && s.pool == r.pool && s.device == r.device) {
        d.reported_conditions = s.conditions;
      }
    }
    const bool failed =
        std::any_of(d.failure_conditions.begin(), d.failure_conditions.end(),
                    [&](const std::string& c) { return ConditionTrue(d.reported_conditions, c); });
    const bool ready =
        std::all_of(d.conditions.begin(), d.conditions.end(),
                    [&](const std::string& c) { return ConditionTrue(d.reported_conditions, c); });
    d.state = failed  ? BindingDevice::State::kFailed
              : ready ? BindingDevice::State::kReady
                      : BindingDevice::State::kPending;
    if (out.domain_uid.empty()) out.domain_uid = ChannelDomainId(allocation, r.request);
    out.devices.push_back(std::move(d));
  }
  if (out.devices.empty()) return std::nullopt;
  return out;
}

bool HasChannelWithoutBindingConditions(const k8s::ResourceClaim& claim) {
  if (!claim.status.allocation.has_value()) return false;
  for (const k8s::DeviceRequestAllocationResult& r : claim.status.allocation->devices.results) {
    if (r.driver == kDriver && absl::StartsWith(r.device, "channel-") &&
        r.binding_conditions.empty()) {
      return true;
    }
  }
  return false;
}

nlohmann::json BindingStatusApplyBody(const k8s::ResourceClaim& claim,
                                      const std::vector<BindingReport>& reports, absl::Time now) {
  const std::string time = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone());
  nlohmann::json devices = nlohmann::json::array();
  for (const BindingReport& r : reports) {
    nlohmann::json conditions = r.keep_conditions;
    if (conditions.is_null()) {
      nlohmann::json c = {{"type", std::string(r.ready ? k8s::kChannelBindingCondition
                                                       : k8s::kChannelBindingFailureCondition)},
                          {"status", "True"},
                          {"reason", r.reason},
                          {"message", r.message},
                          {"lastTransitionTime", time}};
      if (claim.metadata.generation > 0) c["observedGeneration"] = claim.metadata.generation;
      conditions = nlohmann::json::array({std::move(c)});
    }
    devices.push_back({{"driver", std::string(kDriver)},
                       {"pool", r.pool},
                       {"device", r.device},
                       {"conditions", std::move(conditions)}});
  }
  nlohmann::json meta = {{"name", claim.metadata.name},
                         {"namespace", claim.metadata.namespace_name}};
  // A precondition: a claim deleted and created again under the name is not written.
  if (!claim.metadata.uid.empty()) meta["uid"] = claim.metadata.uid;
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", std::move(meta)},
          {"status", {{"devices", std::move(devices)}}}};
}

}  // namespace dra::cdcontroller
