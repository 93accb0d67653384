// DeviceState's checks of a claim against what other prepared claims hold (device_state.h):
// shared devices (consumable shares) and the time-slice intervals of MIG parent GPUs.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/api/errors.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/gpuplugin/prepare/claim_steps.h"
#include "lib/gpuplugin/prepare/device_configs.h"
#include "lib/gpuplugin/prepare/device_state.h"

namespace dra::gpu {
namespace {

using checkpoint::ClaimState;

// The config each device of another prepared claim got, resolved again from its recorded
// allocation (the same resolution as for this claim, so both sides are normalized alike).
absl::StatusOr<std::map<std::string, api::Config>> RecordedConfigs(
    const checkpoint::PreparedClaim& other, const Inventory& inventory,
    const std::string& driver_name, const FeatureGates& gates) {
  nlohmann::json j = {{"apiVersion", "resource.k8s.io/v1"},
                      {"kind", "ResourceClaim"},
                      {"metadata", {{"uid", other.uid}}},
                      {"status", {{"allocation", other.allocation}}}};
  ASSIGN_OR_RETURN(k8s::ResourceClaim claim, k8s::ResourceClaim::FromJson(j));
  if (!claim.status.allocation) return absl::NotFoundError("no allocation recorded");
  ASSIGN_OR_RETURN(std::vector<ConfigGroup> groups,
                   ResolveDeviceConfigs(claim, inventory, driver_name, gates));
  std::map<std::string, api::Config> out;
  for (const ConfigGroup& g : groups) {
    for (const k8s::DeviceRequestAllocationResult* r : g.results) out.emplace(r->device, g.config);
  }
  return out;
}

}  // namespace

absl::Status DeviceState::CheckOverlap(const std::string& uid, const checkpoint::ClaimMap& all,
                                       const std::vector<RecordedDevice>& prepared,
                                       const std::vector<const api::Config*>& configs) const {
  for (const auto& [other_uid, other] : all) {
    if (other_uid == uid || other.state != ClaimState::kPrepareCompleted) continue;
    ASSIGN_OR_RETURN(std::vector<RecordedDevice> held,
                     PreparedDevicesFromJson(other.prepared_devices));
    std::set<std::string> names;
    for (const RecordedDevice& h : held) {
      if (!h.admin_access) names.insert(h.kubelet.device_name);
    }
    std::optional<absl::StatusOr<std::map<std::string, api::Config>>> other_configs;
    for (size_t i = 0; i < prepared.size(); ++i) {
      const RecordedDevice& p = prepared[i];
      if (p.admin_access || !names.contains(p.kubelet.device_name)) continue;
      if (!options_.consumable_shares.Enabled() || p.type == DeviceType::kVfio) {
        return absl::FailedPreconditionError(
            absl::StrCat("requested device ", p.kubelet.device_name,
                         " is already allocated to different claim ", other_uid));
      }
      if (!other_configs) {
        other_configs = RecordedConfigs(other, inventory_, options_.driver_name, gates());
      }
      const api::Config* theirs = nullptr;
      if (other_configs->ok()) {
        auto it = (*other_configs)->find(p.kubelet.device_name);
        if (it != (*other_configs)->end()) theirs = &it->second;
      } else {
        DRA_WARNING("cannot resolve the configs of a prepared claim; treating them as different",
                    "claim", other_uid, "err", other_configs->status());
      }
      if (theirs == nullptr || !(*theirs == *configs[i])) {
        return absl::FailedPreconditionError(
            absl::StrCat("requested device ", p.kubelet.device_name,
                         " has conflicting configuration with already prepared claim ", other_uid));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status DeviceState::CheckMigIntervals(const k8s::ResourceClaim& claim,
                                            const checkpoint::ClaimMap& all,
                                            const std::vector<Plan::MigInterval>& wanted) const {
  if (wanted.empty()) return absl::OkStatus();
  const std::string& uid = claim.metadata.uid;
  const std::string self = absl::StrCat("claim ", claim.metadata.namespace_name, "/",
                                        claim.metadata.name, " (", uid, ")");
  constexpr absl::string_view kWhy =
      "; the time-slice interval is a setting of the physical GPU, shared by all its MIG "
      "devices: ask for the same interval, for Default, or for a MIG device of another GPU";
  const std::map<std::string, HeldMigInterval> held = MigParentIntervalsHeld(uid, all);
  std::map<std::string, const Plan::MigInterval*> mine;  // parent UUID -> first device asking
  for (const Plan::MigInterval& w : wanted) {
    auto [first, inserted] = mine.emplace(w.parent_uuid, &w);
    if (!inserted && first->second->interval != w.interval) {
      return api::ConfigError(
          "sharing.timeSlicingConfig.interval",
          absl::StrCat(self, " asks time-slice interval ", api::TimeSliceIntervalName(w.interval),
                       " for MIG device ", w.device, " and ",
                       api::TimeSliceIntervalName(first->second->interval), " for MIG device ",
                       first->second->device, ", both on parent GPU ", w.parent_uuid, kWhy));
    }
    auto other = held.find(w.parent_uuid);
    if (other != held.end() && other->second.interval != w.interval) {
      return api::ConfigError(
          "sharing.timeSlicingConfig.interval",
          absl::StrCat(self, " asks time-slice interval ", api::TimeSliceIntervalName(w.interval),
                       " for MIG device ", w.device, " on parent GPU ", w.parent_uuid,
                       ", but prepared claim ", other->second.namespace_name, "/",
                       other->second.name, " (", other->second.claim_uid, ") holds interval ",
                       api::TimeSliceIntervalName(other->second.interval), " on that GPU", kWhy));
    }
  }
  return absl::OkStatus();
}

}  // namespace dra::gpu
