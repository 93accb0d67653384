#include "lib/gpu/device_state.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "lib/api/errors.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/gpu/device_configs.h"

namespace dra::gpu {
namespace {

using checkpoint::ClaimState;

// Sharing needs device setup that this build does not do yet (time-slicing and MPS arrive with
// their own work); reject it clearly instead of handing out an unshared device.
absl::Status CheckSupported(const api::Config& config) {
  auto unsupported = [](absl::string_view what) {
    return absl::UnimplementedError(
        absl::StrCat(what, " sharing is not supported by this version of the plugin"));
  };
  if (const auto* g = std::get_if<api::GpuConfig>(&config); g && g->sharing) {
    return unsupported(api::SharingStrategyName(g->sharing->strategy));
  }
  if (const auto* m = std::get_if<api::MigDeviceConfig>(&config);
      m && m->sharing && m->sharing->strategy == api::SharingStrategy::kMps) {
    return unsupported("MPS");
  }
  if (std::holds_alternative<api::VfioDeviceConfig>(config)) {
    return absl::UnimplementedError("VFIO passthrough is not supported by this version");
  }
  return absl::OkStatus();
}

}  // namespace

DeviceState::DeviceState(Inventory inventory, const ClaimCdi* cdi,
                         checkpoint::Checkpoint* checkpoint, Options options)
    : inventory_(std::move(inventory)),
      cdi_(cdi),
      checkpoint_(checkpoint),
      options_(std::move(options)) {}

absl::StatusOr<std::vector<PreparedDevice>> DeviceState::Prepare(const k8s::ResourceClaim& claim) {
  absl::MutexLock lock(&mu_);
  auto devices = PrepareLocked(claim);
  if (!devices.ok()) {
    return Annotate(devices.status(),
                    absl::StrCat("prepare claim ", claim.metadata.namespace_name, "/",
                                 claim.metadata.name, " (", claim.metadata.uid, ")"));
  }
  return devices;
}

absl::StatusOr<std::vector<PreparedDevice>> DeviceState::PrepareLocked(
    const k8s::ResourceClaim& claim) {
  const std::string& uid = claim.metadata.uid;
  // One read serves the idempotency check and the overlap check below.
  ASSIGN_OR_RETURN(checkpoint::ClaimMap all, checkpoint_->List());
  if (auto it = all.find(uid);
      it != all.end() && it->second.state == ClaimState::kPrepareCompleted) {
    DRA_VLOG(4, "claim already prepared", "claim", uid);
    return PreparedDevicesFromJson(it->second.prepared_devices);
  }
  if (!claim.status.allocation) return absl::FailedPreconditionError("claim not yet allocated");
  FeatureGates no_gates;
  const FeatureGates& gates = options_.gates ? *options_.gates : no_gates;
  ASSIGN_OR_RETURN(std::vector<ConfigGroup> groups,
                   ResolveDeviceConfigs(claim, inventory_, options_.driver_name, gates));
  for (const ConfigGroup& g : groups) RETURN_IF_ERROR(CheckSupported(g.config));

  std::vector<PreparedDevice> prepared;
  for (const ConfigGroup& g : groups) {
    for (size_t i = 0; i < g.results.size(); ++i) {
      const k8s::DeviceRequestAllocationResult& r = *g.results[i];
      const AllocatableDevice& d = *g.devices[i];
      if (r.pool != options_.pool_name) {
        return absl::InvalidArgumentError(absl::StrCat("device \"", r.device, "\" is from pool \"",
                                                       r.pool, "\", not from this node's pool \"",
                                                       options_.pool_name, "\""));
      }
      PreparedDevice p;
      p.requests = {r.request};
      p.pool = r.pool;
      p.device = r.device;
      p.cdi_device_ids = {ClaimCdi::DeviceId(uid, r.device)};
      p.type = d.type;
      p.uuid = d.mig ? d.mig->uuid : d.gpu.uuid;
      p.minor = d.gpu.minor;
      p.pci_bus_id = d.gpu.pci_bus_id;
      p.mig = d.mig;
      p.admin_access = r.admin_access.value_or(false);
      prepared.push_back(std::move(p));
    }
  }

  // No device may be held by another prepared claim, unless one side has admin access.
  for (const auto& [other_uid, other] : all) {
    if (other_uid == uid || other.state != ClaimState::kPrepareCompleted) continue;
    ASSIGN_OR_RETURN(std::vector<PreparedDevice> held,
                     PreparedDevicesFromJson(other.prepared_devices));
    std::set<std::string> names;
    for (const PreparedDevice& h : held) {
      if (!h.admin_access) names.insert(h.device);
    }
    for (const PreparedDevice& p : prepared) {
      if (!p.admin_access && names.contains(p.device)) {
        return absl::FailedPreconditionError(absl::StrCat("requested device ", p.device,
                                                          " is already allocated to different "
                                                          "claim ",
                                                          other_uid));
      }
    }
  }

  RETURN_IF_ERROR(cdi_->Write(uid, prepared).status());
  nlohmann::json allocation = claim.ToJson()["status"]["allocation"];
  RETURN_IF_ERROR(checkpoint_->Update([&](checkpoint::ClaimMap& claims) {
    checkpoint::PreparedClaim& c = claims[uid];
    c.uid = uid;
    c.namespace_name = claim.metadata.namespace_name;
    c.name = claim.metadata.name;
    c.state = ClaimState::kPrepareCompleted;
    c.allocation = allocation;
    c.prepared_devices = PreparedDevicesToJson(prepared);
    CountPreparedDevices(claims);
    return absl::OkStatus();
  }));
  DRA_INFO("prepared claim", "claim", uid, "namespace", claim.metadata.namespace_name, "name",
           claim.metadata.name, "devices", prepared.size());
  return prepared;
}

void DeviceState::CountPreparedDevices(const checkpoint::ClaimMap& claims) {
  std::map<std::string, int> counts;
  for (const auto& [uid, c] : claims) {
    if (c.state != ClaimState::kPrepareCompleted) continue;
    auto devices = PreparedDevicesFromJson(c.prepared_devices);
    if (!devices.ok()) {
      ++counts["unknown"];
      continue;
    }
    for (const PreparedDevice& d : *devices) ++counts[DeviceTypeName(d.type)];
  }
  absl::MutexLock lock(&counts_mu_);
  prepared_counts_ = std::move(counts);
}

std::map<std::string, int> DeviceState::PreparedDeviceCounts() const {
  absl::MutexLock lock(&counts_mu_);
  return prepared_counts_;
}

absl::Status DeviceState::Unprepare(const std::string& claim_uid) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::optional<checkpoint::PreparedClaim> existing, checkpoint_->Get(claim_uid));
  if (!existing) {
    // Still remove a CDI spec a crashed prepare may have left behind.
    RETURN_IF_ERROR(cdi_->Remove(claim_uid));
    DRA_VLOG(4, "unprepare: claim not in checkpoint", "claim", claim_uid);
    return absl::OkStatus();
  }
  // Full GPUs and static MIG devices need no device teardown.
  RETURN_IF_ERROR(cdi_->Remove(claim_uid));
  RETURN_IF_ERROR(checkpoint_->Update([&](checkpoint::ClaimMap& claims) {
    claims.erase(claim_uid);
    CountPreparedDevices(claims);
    return absl::OkStatus();
  }));
  DRA_INFO("unprepared claim", "claim", claim_uid, "namespace", existing->namespace_name, "name",
           existing->name);
  return absl::OkStatus();
}

}  // namespace dra::gpu
