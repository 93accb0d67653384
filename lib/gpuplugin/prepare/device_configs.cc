#include "lib/gpuplugin/prepare/device_configs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/api/config.h"
#include "lib/api/driver_gates.h"
#include "lib/api/errors.h"
#include "lib/common/status.h"

namespace dra::gpu {
namespace {

struct Candidate {
  api::Config config;
  std::vector<std::string> requests;  // empty: applies to every request
};

bool TypeMatches(const api::Config& config, DeviceType type) {
  return (std::holds_alternative<api::GpuConfig>(config) && type == DeviceType::kGpu) ||
         (std::holds_alternative<api::MigDeviceConfig>(config) && type == DeviceType::kMig) ||
         (std::holds_alternative<api::VfioDeviceConfig>(config) && type == DeviceType::kVfio);
}

absl::Status Permanent(absl::Status s) { return api::MarkPermanentConfigError(std::move(s)); }

}  // namespace

absl::StatusOr<std::vector<ConfigGroup>> ResolveDeviceConfigs(const k8s::ResourceClaim& claim,
                                                              const Inventory& inventory,
                                                              const std::string& driver_name,
                                                              const FeatureGates& gates) {
  const k8s::DeviceAllocationResult& alloc = claim.status.allocation->devices;
  std::vector<Candidate> candidates;
  candidates.push_back({api::DefaultGpuConfig(), {}});
  candidates.push_back({api::DefaultMigDeviceConfig(), {}});
  if (auto vfio = api::DefaultVfioDeviceConfig(
          gates.Enabled(std::string(api::gate::kPassthroughSupport)))) {
    candidates.push_back({*vfio, {}});
  }
  // Class configs come before claim configs; within each source, allocation order.
  for (const char* source : {"FromClass", "FromClaim"}) {
    for (size_t i = 0; i < alloc.config.size(); ++i) {
      const k8s::DeviceAllocationConfiguration& c = alloc.config[i];
      if (c.source != "FromClass" && c.source != "FromClaim") {
        return Permanent(absl::InvalidArgumentError(absl::StrCat(
            "status.allocation.devices.config[", i, "].source: invalid config source \"", c.source,
            "\" (allowed: FromClass, FromClaim)")));
      }
      if (c.source != source) continue;
      if (!c.opaque) {
        return Permanent(absl::InvalidArgumentError(
            absl::StrCat("status.allocation.devices.config[", i,
                         "]: only opaque parameters are supported by this driver")));
      }
      if (c.opaque->driver != driver_name) continue;
      auto decoded = api::DecodeOpaqueConfig(c.opaque->parameters, gates);
      if (!decoded.ok()) {
        return Permanent(
            Annotate(decoded.status(), absl::StrCat("status.allocation.devices.config[", i,
                                                    "].opaque.parameters (", source, ")")));
      }
      if (!api::IsGpuDeviceConfig(*decoded)) {
        return Permanent(absl::InvalidArgumentError(absl::StrCat(
            "status.allocation.devices.config[", i, "].opaque.parameters: kind ",
            api::KindName(*decoded), " does not configure devices of driver ", driver_name)));
      }
      candidates.push_back({std::move(*decoded), c.requests});
    }
  }

  std::vector<ConfigGroup> groups;
  std::vector<int> group_of_candidate(candidates.size(), -1);
  for (size_t r = 0; r < alloc.results.size(); ++r) {
    const k8s::DeviceRequestAllocationResult& result = alloc.results[r];
    if (result.driver != driver_name) continue;
    const AllocatableDevice* device = inventory.Find(result.device);
    if (device == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("allocatable not found for device \"", result.device, "\""));
    }
    // A result of request "req/sub" also matches configs that name the parent request "req".
    std::string base = result.request.substr(0, result.request.find('/'));
    int chosen = -1;
    for (int c = static_cast<int>(candidates.size()) - 1; c >= 0; --c) {
      const Candidate& cand = candidates[c];
      bool named =
          std::find(cand.requests.begin(), cand.requests.end(), result.request) !=
              cand.requests.end() ||
          std::find(cand.requests.begin(), cand.requests.end(), base) != cand.requests.end();
      if (named) {
        if (!TypeMatches(cand.config, device->type)) {
          return Permanent(absl::InvalidArgumentError(
              absl::StrCat("cannot apply ", api::KindName(cand.config), " to device \"",
                           result.device, "\" of type \"", DeviceTypeName(device->type),
                           "\" (request: ", result.request, ")")));
        }
        chosen = c;
        break;
      }
      if (cand.requests.empty() && TypeMatches(cand.config, device->type)) {
        chosen = c;
        break;
      }
    }
    if (chosen < 0) {
      return absl::InternalError(
          absl::StrCat("no configuration applies to device \"", result.device, "\""));
    }
    if (group_of_candidate[chosen] < 0) {
      group_of_candidate[chosen] = static_cast<int>(groups.size());
      groups.push_back({candidates[chosen].config, {}, {}});
    }
    ConfigGroup& g = groups[group_of_candidate[chosen]];
    g.results.push_back(&result);
    g.devices.push_back(device);
  }
  return groups;
}

}  // namespace dra::gpu
