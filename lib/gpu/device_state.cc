#include "lib/gpu/device_state.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "lib/api/driver_gates.h"
#include "lib/api/errors.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/gpu/device_configs.h"

namespace dra::gpu {
namespace {

using checkpoint::ClaimState;

absl::Status CheckSupported(const api::Config& config, const FeatureGates& gates) {
  // The Go driver refuses MPS with DynamicMIG; the gates exclude each other, so this only
  // matters where they were set without the constraint checks.
  if (api::UsesMps(config) && gates.Enabled(api::gate::kDynamicMIG)) {
    return api::ConfigError("sharing.strategy",
                            "MPS sharing is not supported when the feature gate DynamicMIG is "
                            "enabled");
  }
  if (std::holds_alternative<api::VfioDeviceConfig>(config)) {
    return absl::UnimplementedError("VFIO passthrough is not supported by this version");
  }
  return absl::OkStatus();
}

// The interval when `config` asks for time-slicing of full GPUs (GpuConfig, strategy TimeSlicing;
// normalized, so the interval is set). MIG time-slicing has no setting: nullopt.
std::optional<api::TimeSliceInterval> TimeSliceOf(const api::Config& config) {
  const auto* g = std::get_if<api::GpuConfig>(&config);
  if (g == nullptr || !g->sharing || g->sharing->strategy != api::SharingStrategy::kTimeSlicing) {
    return std::nullopt;
  }
  if (g->sharing->time_slicing_config && g->sharing->time_slicing_config->interval) {
    return *g->sharing->time_slicing_config->interval;
  }
  return api::TimeSliceInterval::kDefault;
}

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

// UUIDs of the full GPUs that PrepareCompleted claims other than `uid` hold.
std::set<std::string> GpusHeldByOthers(const std::string& uid, const checkpoint::ClaimMap& all) {
  std::set<std::string> held;
  for (const auto& [other_uid, other] : all) {
    if (other_uid == uid || other.state != ClaimState::kPrepareCompleted) continue;
    auto devices = PreparedDevicesFromJson(other.prepared_devices);
    if (!devices.ok()) continue;
    for (const PreparedDevice& d : *devices) {
      if (d.type == DeviceType::kGpu) held.insert(d.uuid);
    }
  }
  return held;
}

}  // namespace

DeviceState::DeviceState(Inventory inventory, const ClaimCdi* cdi,
                         checkpoint::Checkpoint* checkpoint, Options options)
    : inventory_(std::move(inventory)),
      cdi_(cdi),
      checkpoint_(checkpoint),
      options_(std::move(options)) {}

const FeatureGates& DeviceState::gates() const {
  static const FeatureGates* const kNone = new FeatureGates();
  return options_.gates ? *options_.gates : *kNone;
}

absl::StatusOr<std::vector<PreparedDevice>> DeviceState::Prepare(const k8s::ResourceClaim& claim,
                                                                 const Deadline& deadline) {
  absl::MutexLock lock(&mu_);
  auto devices = PrepareLocked(claim, deadline);
  if (!devices.ok()) {
    return Annotate(devices.status(),
                    absl::StrCat("prepare claim ", claim.metadata.namespace_name, "/",
                                 claim.metadata.name, " (", claim.metadata.uid, ")"));
  }
  return devices;
}

absl::StatusOr<DeviceState::Plan> DeviceState::PlanLocked(const k8s::ResourceClaim& claim) const {
  const std::string& uid = claim.metadata.uid;
  if (!claim.status.allocation) return absl::FailedPreconditionError("claim not yet allocated");
  Plan plan;
  ASSIGN_OR_RETURN(plan.groups,
                   ResolveDeviceConfigs(claim, inventory_, options_.driver_name, gates()));
  for (const ConfigGroup& g : plan.groups) {
    RETURN_IF_ERROR(api::CheckConsumableSharesAllowSharing(g.config, options_.consumable_shares));
    RETURN_IF_ERROR(CheckSupported(g.config, gates()));
  }
  for (const ConfigGroup& g : plan.groups) {
    const std::optional<api::TimeSliceInterval> interval = TimeSliceOf(g.config);
    plan.time_slicing = plan.time_slicing || interval.has_value();
    std::optional<MpsDaemonRecord> mps_record;
    if (const std::optional<api::MpsConfig> mps = MpsConfigOf(g.config)) {
      if (options_.mps == nullptr) {
        return absl::InternalError("MPS sharing requested but this plugin cannot start daemons");
      }
      ASSIGN_OR_RETURN(MpsDaemonGroup group, MpsGroupFor(uid, *mps, g.devices));
      ASSIGN_OR_RETURN(std::unique_ptr<MpsDaemon> daemon, options_.mps->Create(std::move(group)));
      mps_record = daemon->Record();
      std::vector<std::string> names;
      for (const k8s::DeviceRequestAllocationResult* r : g.results) names.push_back(r->device);
      plan.daemons.emplace_back(std::move(daemon), std::move(names));
    }
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
      if (d.type == DeviceType::kGpu) p.time_slice_applied = interval.has_value();
      p.mps_daemon = mps_record;
      plan.prepared.push_back(std::move(p));
      plan.configs.push_back(&g.config);
    }
  }
  return plan;
}

absl::StatusOr<std::vector<PreparedDevice>> DeviceState::PrepareLocked(
    const k8s::ResourceClaim& claim, const Deadline& deadline) {
  const std::string& uid = claim.metadata.uid;
  // One read serves the idempotency check and the overlap check below.
  ASSIGN_OR_RETURN(checkpoint::ClaimMap all, checkpoint_->List());
  const auto existing = all.find(uid);
  if (existing != all.end() && existing->second.state == ClaimState::kPrepareCompleted) {
    DRA_VLOG(4, "claim already prepared", "claim", uid);
    return PreparedDevicesFromJson(existing->second.prepared_devices);
  }
  // Counted from here: the kubelet's timeout started before this call.
  const absl::Time mps_deadline =
      deadline.CapTime(options_.clock->Now() + options_.mps_ready_timeout);
  ASSIGN_OR_RETURN(Plan plan, PlanLocked(claim));
  const std::vector<ConfigGroup>& groups = plan.groups;
  const std::vector<PreparedDevice>& prepared = plan.prepared;
  const std::vector<const api::Config*>& configs = plan.configs;
  auto& daemons = plan.daemons;
  const bool time_slicing = plan.time_slicing;
  RETURN_IF_ERROR(CheckOverlap(uid, all, prepared, configs));

  // Nothing has changed yet: a prepare past its deadline stops here without a trace.
  RETURN_IF_ERROR(deadline.Check("set up devices"));
  // A prepare that crashed or failed half-way may have changed GPUs: undo that first.
  if (existing != all.end()) {
    ASSIGN_OR_RETURN(std::vector<PreparedDevice> partial,
                     PreparedDevicesFromJson(existing->second.prepared_devices));
    RETURN_IF_ERROR(Annotate(ResetTimeSlices(uid, all, partial), "roll back partial prepare"));
    // Daemons of this plan are kept: Start completes a partial start, and a daemon that was
    // merely slow (an image pull) gets its chance to become ready.
    std::set<std::string> keep;
    for (const auto& [daemon, names] : daemons) keep.insert(daemon->Record().id);
    RETURN_IF_ERROR(Annotate(StopMpsDaemons(partial, keep), "roll back partial prepare"));
  }
  nlohmann::json allocation = claim.ToJson()["status"]["allocation"];
  auto record = [&](ClaimState state) {
    return checkpoint_->Update([&](checkpoint::ClaimMap& claims) {
      checkpoint::PreparedClaim& c = claims[uid];
      c.uid = uid;
      c.namespace_name = claim.metadata.namespace_name;
      c.name = claim.metadata.name;
      c.state = state;
      c.allocation = allocation;
      c.prepared_devices = PreparedDevicesToJson(prepared);
      CountPreparedDevices(claims);
      return absl::OkStatus();
    });
  };
  if (time_slicing && options_.time_slicing == nullptr) {
    return absl::InternalError("time-slicing requested but this plugin has no nvidia-smi runner");
  }
  // Recorded before nvidia-smi runs and before a daemon starts, so that a crash or a failure from
  // here on is rolled back (by the retried prepare, or by the unprepare of the cleanup).
  if (time_slicing || !daemons.empty()) RETURN_IF_ERROR(record(ClaimState::kPrepareStarted));
  if (time_slicing) {
    for (const ConfigGroup& g : groups) {
      const std::optional<api::TimeSliceInterval> interval = TimeSliceOf(g.config);
      if (!interval) continue;
      std::vector<std::string> uuids;
      std::set<std::string> seen;  // with consumable shares two requests may get one GPU
      for (const AllocatableDevice* d : g.devices) {
        if (d->type == DeviceType::kGpu && seen.insert(d->gpu.uuid).second) {
          uuids.push_back(d->gpu.uuid);
        }
      }
      RETURN_IF_ERROR(options_.time_slicing->Apply(uuids, *interval, deadline));
      DRA_INFO("applied GPU time-slicing", "claim", uid, "interval",
               api::TimeSliceIntervalName(*interval), "gpus", uuids.size());
    }
  }

  std::map<std::string, cdi::ContainerEdits> device_edits;
  for (const auto& [daemon, names] : daemons) {
    RETURN_IF_ERROR(deadline.Check("start MPS daemon " + daemon->Record().id));
    RETURN_IF_ERROR(daemon->Start());
    RETURN_IF_ERROR(daemon->AssertReady(mps_deadline));
    const cdi::ContainerEdits edits = daemon->ContainerEdits();
    for (const std::string& name : names) device_edits[name].Append(edits);
    DRA_INFO("MPS control daemon ready", "claim", uid, "id", daemon->Record().id, "devices",
             names.size());
  }

  // One CDI device per allocated device: with consumable shares, two requests of the claim may
  // have been given the same device, and CDI device names must be unique within the spec.
  std::vector<PreparedDevice> cdi_devices;
  std::set<std::string> in_spec;
  for (const PreparedDevice& p : prepared) {
    if (in_spec.insert(p.device).second) cdi_devices.push_back(p);
  }
  RETURN_IF_ERROR(deadline.Check("write the CDI spec"));
  RETURN_IF_ERROR(cdi_->Write(uid, cdi_devices, device_edits).status());
  RETURN_IF_ERROR(record(ClaimState::kPrepareCompleted));
  DRA_INFO("prepared claim", "claim", uid, "namespace", claim.metadata.namespace_name, "name",
           claim.metadata.name, "devices", prepared.size());
  return prepared;
}

absl::Status DeviceState::CheckOverlap(const std::string& uid, const checkpoint::ClaimMap& all,
                                       const std::vector<PreparedDevice>& prepared,
                                       const std::vector<const api::Config*>& configs) const {
  for (const auto& [other_uid, other] : all) {
    if (other_uid == uid || other.state != ClaimState::kPrepareCompleted) continue;
    ASSIGN_OR_RETURN(std::vector<PreparedDevice> held,
                     PreparedDevicesFromJson(other.prepared_devices));
    std::set<std::string> names;
    for (const PreparedDevice& h : held) {
      if (!h.admin_access) names.insert(h.device);
    }
    std::optional<absl::StatusOr<std::map<std::string, api::Config>>> other_configs;
    for (size_t i = 0; i < prepared.size(); ++i) {
      const PreparedDevice& p = prepared[i];
      if (p.admin_access || !names.contains(p.device)) continue;
      if (!options_.consumable_shares.Enabled() || p.type == DeviceType::kVfio) {
        return absl::FailedPreconditionError(absl::StrCat(
            "requested device ", p.device, " is already allocated to different claim ", other_uid));
      }
      if (!other_configs) {
        other_configs = RecordedConfigs(other, inventory_, options_.driver_name, gates());
      }
      const api::Config* theirs = nullptr;
      if (other_configs->ok()) {
        auto it = (*other_configs)->find(p.device);
        if (it != (*other_configs)->end()) theirs = &it->second;
      } else {
        DRA_WARNING("cannot resolve the configs of a prepared claim; treating them as different",
                    "claim", other_uid, "err", other_configs->status());
      }
      if (theirs == nullptr || !(*theirs == *configs[i])) {
        return absl::FailedPreconditionError(
            absl::StrCat("requested device ", p.device,
                         " has conflicting configuration with already prepared claim ", other_uid));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status DeviceState::ResetTimeSlices(const std::string& uid, const checkpoint::ClaimMap& all,
                                          const std::vector<PreparedDevice>& devices) const {
  const bool gate = gates().Enabled(std::string(api::gate::kTimeSlicingSettings));
  std::vector<std::string> reset;
  std::set<std::string> held;
  bool held_known = false;
  for (const PreparedDevice& d : devices) {
    if (d.type != DeviceType::kGpu) continue;
    // Explicitly false: never touched. Absent: a record from before time-slicing; reset while
    // the gate is on, as the Go driver does.
    if (!d.time_slice_applied.value_or(gate)) continue;
    if (!held_known) {
      held = GpusHeldByOthers(uid, all);
      held_known = true;
    }
    if (held.contains(d.uuid)) {
      DRA_VLOG(2, "GPU still used by another claim; keeping its time-slice", "claim", uid, "uuid",
               d.uuid);
      continue;
    }
    reset.push_back(d.uuid);
  }
  if (reset.empty()) return absl::OkStatus();
  if (options_.time_slicing == nullptr) {
    return absl::FailedPreconditionError(
        "GPU time-slices need a reset but this plugin has no nvidia-smi runner");
  }
  RETURN_IF_ERROR(Annotate(options_.time_slicing->Reset(reset), "reset GPU time-slice"));
  DRA_INFO("reset GPU time-slicing", "claim", uid, "gpus", reset.size());
  return absl::OkStatus();
}

absl::Status DeviceState::StopMpsDaemons(const std::vector<PreparedDevice>& devices,
                                         const std::set<std::string>& keep) const {
  std::set<std::string> done;
  for (const PreparedDevice& d : devices) {
    if (!d.mps_daemon || keep.contains(d.mps_daemon->id) || !done.insert(d.mps_daemon->id).second) {
      continue;
    }
    if (options_.mps == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "MPS control daemon ", d.mps_daemon->id, " needs a stop but this plugin has no MPS"));
    }
    RETURN_IF_ERROR(options_.mps->Stop(*d.mps_daemon));
  }
  return absl::OkStatus();
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

absl::StatusOr<bool> DeviceState::Rebuild(const k8s::ResourceClaim& claim) {
  absl::MutexLock lock(&mu_);
  const std::string& uid = claim.metadata.uid;
  absl::StatusOr<Plan> plan = PlanLocked(claim);
  if (!plan.ok()) {
    return Annotate(plan.status(),
                    absl::StrCat("rebuild the record of claim ", claim.metadata.namespace_name, "/",
                                 claim.metadata.name, " (", uid, ")"));
  }
  nlohmann::json allocation = claim.ToJson()["status"]["allocation"];
  bool added = false;
  RETURN_IF_ERROR(checkpoint_->Update([&](checkpoint::ClaimMap& claims) {
    if (claims.contains(uid)) return absl::OkStatus();  // recorded meanwhile: that record wins
    checkpoint::PreparedClaim& c = claims[uid];
    c.uid = uid;
    c.namespace_name = claim.metadata.namespace_name;
    c.name = claim.metadata.name;
    c.state = ClaimState::kPrepareCompleted;
    c.allocation = allocation;
    c.prepared_devices = PreparedDevicesToJson(plan->prepared);
    CountPreparedDevices(claims);
    added = true;
    return absl::OkStatus();
  }));
  if (added) {
    DRA_INFO("rebuilt the checkpoint record of a prepared claim", "claim", uid, "namespace",
             claim.metadata.namespace_name, "name", claim.metadata.name, "devices",
             plan->prepared.size());
  }
  return added;
}

absl::Status DeviceState::Unprepare(const std::string& claim_uid) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(checkpoint::ClaimMap all, checkpoint_->List());
  auto existing = all.find(claim_uid);
  if (existing == all.end()) {
    // Still remove a CDI spec a crashed prepare may have left behind.
    RETURN_IF_ERROR(cdi_->Remove(claim_uid));
    DRA_VLOG(4, "unprepare: claim not in checkpoint", "claim", claim_uid);
    return absl::OkStatus();
  }
  // Full GPUs and static MIG devices need no teardown beyond the MPS daemon and the time-slice; a
  // PrepareStarted claim's record lists the GPUs and daemons its prepare may have changed.
  auto devices = PreparedDevicesFromJson(existing->second.prepared_devices);
  if (devices.ok()) {
    RETURN_IF_ERROR(StopMpsDaemons(*devices, {}));
    RETURN_IF_ERROR(ResetTimeSlices(claim_uid, all, *devices));
  } else {
    DRA_WARNING("unprepare: unreadable device record; no device teardown", "claim", claim_uid,
                "err", devices.status());
  }
  RETURN_IF_ERROR(cdi_->Remove(claim_uid));
  RETURN_IF_ERROR(checkpoint_->Update([&](checkpoint::ClaimMap& claims) {
    claims.erase(claim_uid);
    CountPreparedDevices(claims);
    return absl::OkStatus();
  }));
  DRA_INFO("unprepared claim", "claim", claim_uid, "namespace", existing->second.namespace_name,
           "name", existing->second.name, "state",
           checkpoint::ClaimStateName(existing->second.state));
  return absl::OkStatus();
}

}  // namespace dra::gpu
