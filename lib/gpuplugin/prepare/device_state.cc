#include "lib/gpuplugin/prepare/device_state.h"

#include <algorithm>
#include <functional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "lib/api/driver_gates.h"
#include "lib/api/errors.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/common/trace.h"
#include "lib/gpuplugin/prepare/device_configs.h"

namespace dra::gpu {
namespace {

using checkpoint::ClaimState;

// The interval when `config` asks for time-slicing of full GPUs (GpuConfig, strategy TimeSlicing;
// normalized, so the interval is set). MigDeviceConfig: MigTimeSliceOf.
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

// The interval a MigDeviceConfig (strategy TimeSlicing, normalized) asks for on its devices'
// parent GPUs (time_slicing.h); nullopt without a timeSlicingConfig or with interval Default,
// which set nothing.
std::optional<api::TimeSliceInterval> MigTimeSliceOf(const api::Config& config) {
  const auto* m = std::get_if<api::MigDeviceConfig>(&config);
  if (m == nullptr || !m->sharing || m->sharing->strategy != api::SharingStrategy::kTimeSlicing ||
      !m->sharing->time_slicing_config || !m->sharing->time_slicing_config->interval ||
      *m->sharing->time_slicing_config->interval == api::TimeSliceInterval::kDefault) {
    return std::nullopt;
  }
  return *m->sharing->time_slicing_config->interval;
}

// Gate DeviceMetadata: the claim's metadata (device_metadata.h) with its requests and devices in
// allocation order, and each request's metadata CDI ID added to its first device in `prepared`.
// Attributes only for VFIO devices, as the Go driver fills them.
MetadataClaim MetadataOf(const k8s::ResourceClaim& claim, const std::string& driver,
                         const std::vector<ConfigGroup>& groups,
                         std::vector<RecordedDevice>& prepared) {
  MetadataClaim m{.uid = claim.metadata.uid,
                  .namespace_name = claim.metadata.namespace_name,
                  .name = claim.metadata.name};
  auto ann = claim.metadata.annotations.find(kPodClaimNameAnnotation);
  if (ann != claim.metadata.annotations.end()) m.pod_claim_name = ann->second;
  std::map<std::string, const AllocatableDevice*> by_name;
  for (const ConfigGroup& g : groups) {
    for (size_t i = 0; i < g.results.size(); ++i) by_name[g.results[i]->device] = g.devices[i];
  }
  for (const k8s::DeviceRequestAllocationResult& r : claim.status.allocation->devices.results) {
    auto d = by_name.find(r.device);
    if (r.driver != driver || d == by_name.end()) continue;
    const std::string request = TopLevelRequest(r.request);
    auto it = std::find_if(m.requests.begin(), m.requests.end(),
                           [&](const MetadataRequest& x) { return x.name == request; });
    if (it == m.requests.end()) {
      m.requests.push_back({.name = request});
      it = std::prev(m.requests.end());
      for (RecordedDevice& p : prepared) {
        if (p.kubelet.device_name == r.device && !p.kubelet.request_names.empty() &&
            p.kubelet.request_names[0] == r.request) {
          p.kubelet.cdi_device_ids.push_back(DeviceMetadataFiles::CdiDeviceId(m.uid, request));
          break;
        }
      }
    }
    MetadataDevice md{.driver = r.driver, .pool = r.pool, .name = r.device};
    if (d->second->type == DeviceType::kVfio) {
      k8s::ResourceSlice slice;
      slice.spec.devices.push_back(d->second->published);
      md.attributes =
          slice.ToJson()["spec"]["devices"][0].value("attributes", nlohmann::json::object());
    }
    it->devices.push_back(std::move(md));
  }
  return m;
}

// The claim's checkpoint entry as the step engine's journal: every write records `base` (the
// claim's identity, allocation and devices) with the given state and steps; each committed write
// recounts from the claims as written (Checkpoint::Update's on_commit).
class ClaimJournal final : public prepare::StepJournal {
 public:
  ClaimJournal(checkpoint::Checkpoint* checkpoint, checkpoint::PreparedClaim base,
               std::function<void(const checkpoint::ClaimMap&)> recount)
      : checkpoint_(checkpoint), base_(std::move(base)), recount_(std::move(recount)) {}

  absl::Status Started(const std::vector<prepare::StepRecord>& steps) override {
    return Write(ClaimState::kPrepareStarted, steps);
  }
  absl::Status Completed(const std::vector<prepare::StepRecord>& steps) override {
    return Write(ClaimState::kPrepareCompleted, steps);
  }
  absl::Status Forget() override {
    return checkpoint_->Update(
        [&](checkpoint::ClaimMap& claims) {
          claims.erase(base_.uid);
          return absl::OkStatus();
        },
        recount_);
  }

 private:
  absl::Status Write(ClaimState state, const std::vector<prepare::StepRecord>& steps) {
    return checkpoint_->Update(
        [&](checkpoint::ClaimMap& claims) {
          checkpoint::PreparedClaim& c = claims[base_.uid];
          c = base_;
          c.state = state;
          c.steps = prepare::StepRecordsToJson(steps);
          return absl::OkStatus();
        },
        recount_);
  }

  checkpoint::Checkpoint* const checkpoint_;
  const checkpoint::PreparedClaim base_;
  const std::function<void(const checkpoint::ClaimMap&)> recount_;
};

}  // namespace

DeviceState::Options DeviceState::WithOwnServices(Options options, const ClaimCdi* cdi) {
  options.services.cdi = cdi;
  options.services.vfio = options.vfio != nullptr ? options.vfio->host : nullptr;
  return options;
}

DeviceState::DeviceState(Inventory inventory, const ClaimCdi* cdi,
                         checkpoint::Checkpoint* checkpoint, Options options)
    : inventory_(std::move(inventory)),
      cdi_(cdi),
      checkpoint_(checkpoint),
      options_(WithOwnServices(std::move(options), cdi)) {}

const FeatureGates& DeviceState::gates() const {
  static const FeatureGates* const kNone = new FeatureGates();
  return options_.gates ? *options_.gates : *kNone;
}

absl::StatusOr<std::vector<RecordedDevice>> DeviceState::Prepare(const k8s::ResourceClaim& claim,
                                                                 const Deadline& deadline) {
  absl::MutexLock lock(&mu_);
  // The claim is named by the driver's "error preparing devices for claim ..." (driver.cc).
  return PrepareLocked(claim, deadline);
}

namespace {

// adminAccess observes a device as it is. Devices that exist or work only through what their
// prepare changes are refused: a dynamic MIG device (its prepare creates it and its unprepare
// destroys it, under the claim that holds it) and a VFIO device (bound to vfio-pci and back).
absl::Status CheckAdminAccessDevice(const k8s::DeviceRequestAllocationResult& r,
                                    const AllocatableDevice& d) {
  const std::string field =
      absl::StrCat("status.allocation.devices.results[device=", r.device, "].adminAccess");
  if (d.mig && d.mig->dynamic) {
    return api::ConfigError(
        field, absl::StrCat("adminAccess to dynamic MIG device ", r.device,
                            " is not supported: it exists only while the claim that created it "
                            "is prepared; request the full GPU with adminAccess instead"));
  }
  if (d.type == DeviceType::kVfio) {
    return api::ConfigError(
        field, absl::StrCat("adminAccess to VFIO device ", r.device,
                            " is not supported: preparing it binds the GPU to vfio-pci; request "
                            "the full GPU with adminAccess instead"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DeviceState::Plan> DeviceState::PlanLocked(const k8s::ResourceClaim& claim,
                                                          absl::Time mps_ready_deadline) const {
  const std::string& uid = claim.metadata.uid;
  if (!claim.status.allocation) return absl::FailedPreconditionError("claim not yet allocated");
  Plan plan;
  plan.status_claim = {.namespace_name = claim.metadata.namespace_name,
                       .name = claim.metadata.name,
                       .uid = uid,
                       .generation = claim.metadata.generation};
  std::set<std::tuple<std::string, std::string, std::string>> status_keys;
  ASSIGN_OR_RETURN(plan.groups,
                   ResolveDeviceConfigs(claim, inventory_, options_.driver_name, gates()));
  for (const ConfigGroup& g : plan.groups) {
    RETURN_IF_ERROR(api::CheckConsumableSharesAllowSharing(g.config, options_.consumable_shares));
  }
  for (const ConfigGroup& g : plan.groups) {
    for (size_t i = 0; i < g.results.size(); ++i) {
      if (g.results[i]->admin_access.value_or(false)) {
        RETURN_IF_ERROR(CheckAdminAccessDevice(*g.results[i], *g.devices[i]));
      }
    }
  }
  RETURN_IF_ERROR(PlanVfio(uid, plan));
  for (const ConfigGroup& g : plan.groups) {
    // adminAccess results (KEP-5018: monitoring, possibly of devices other claims hold) observe
    // their devices: the group's sharing (time-slices, MPS) applies only to the others, so that
    // an admin claim's prepare and unprepare never change what a workload relies on.
    std::vector<const AllocatableDevice*> workload_devices;
    std::vector<std::string> workload_names;
    for (size_t i = 0; i < g.results.size(); ++i) {
      if (g.results[i]->admin_access.value_or(false)) continue;
      workload_devices.push_back(g.devices[i]);
      workload_names.push_back(g.results[i]->device);
    }
    if (workload_devices.size() < g.results.size() &&
        (TimeSliceOf(g.config) || MigTimeSliceOf(g.config) || MpsConfigOf(g.config))) {
      DRA_INFO("sharing config not applied to adminAccess devices", "claim", uid, "devices",
               g.results.size() - workload_devices.size());
    }
    const std::optional<api::TimeSliceInterval> interval = TimeSliceOf(g.config);
    if (interval && !workload_devices.empty()) {
      TimeSliceGroup slice{.interval = *interval};
      std::set<std::string> seen;  // with consumable shares two requests may get one GPU
      for (const AllocatableDevice* d : workload_devices) {
        if (d->type == DeviceType::kGpu && seen.insert(d->gpu.uuid).second) {
          slice.gpu_uuids.push_back(d->gpu.uuid);
        }
      }
      plan.time_slices.push_back(std::move(slice));
    }
    if (const std::optional<api::TimeSliceInterval> mig_interval = MigTimeSliceOf(g.config);
        mig_interval && !workload_devices.empty()) {
      TimeSliceGroup parents{.interval = *mig_interval, .mig_parents = true};
      std::set<std::string> seen;
      for (size_t i = 0; i < workload_devices.size(); ++i) {
        const AllocatableDevice* d = workload_devices[i];
        if (d->type != DeviceType::kMig) continue;
        plan.mig_intervals.push_back(
            {.device = workload_names[i], .parent_uuid = d->gpu.uuid, .interval = *mig_interval});
        if (seen.insert(d->gpu.uuid).second) parents.gpu_uuids.push_back(d->gpu.uuid);
      }
      if (!parents.gpu_uuids.empty()) plan.time_slices.push_back(std::move(parents));
    }
    std::optional<MpsDaemonRecord> mps_record;
    const std::optional<api::MpsConfig> mps = MpsConfigOf(g.config);
    if (mps && !workload_devices.empty()) {
      if (options_.services.mps == nullptr) {
        return absl::InternalError("MPS sharing requested but this plugin cannot start daemons");
      }
      ASSIGN_OR_RETURN(MpsDaemonGroup group, MpsGroupFor(uid, *mps, workload_devices));
      std::optional<MpsDaemonGroup> dynamic_group;
      if (!group.id.empty()) dynamic_group = group;  // DynamicMIG devices: UUIDs at prepare
      ASSIGN_OR_RETURN(std::unique_ptr<MpsDaemon> daemon,
                       options_.services.mps->Create(std::move(group)));
      mps_record = daemon->Record();
      plan.daemons.push_back({.daemon = std::move(daemon),
                              .device_names = workload_names,
                              .dynamic_group = std::move(dynamic_group)});
    }
    for (size_t i = 0; i < g.results.size(); ++i) {
      const k8s::DeviceRequestAllocationResult& r = *g.results[i];
      const AllocatableDevice& d = *g.devices[i];
      const bool admin = r.admin_access.value_or(false);
      if (r.pool != options_.pool_name) {
        return absl::InvalidArgumentError(absl::StrCat("device \"", r.device, "\" is from pool \"",
                                                       r.pool, "\", not from this node's pool \"",
                                                       options_.pool_name, "\""));
      }
      if (status_keys.emplace(r.pool, r.device, r.share_id.value_or("")).second) {
        plan.device_statuses.push_back({.pool = r.pool,
                                        .device = r.device,
                                        .share_id = r.share_id,
                                        .data = DeviceStatusData(d)});
      }
      RecordedDevice p;
      p.kubelet = {.request_names = {r.request},
                   .pool_name = r.pool,
                   .device_name = r.device,
                   .cdi_device_ids = {ClaimCdi::DeviceId(uid, r.device)}};
      p.type = d.type;
      p.uuid = d.mig ? d.mig->uuid : d.gpu.uuid;
      p.minor = d.gpu.minor;
      p.pci_bus_id = d.gpu.pci_bus_id;
      p.mig = d.mig;
      p.admin_access = admin;
      if (d.type == DeviceType::kGpu) p.time_slice_applied = interval.has_value() && !admin;
      if (!admin) p.mps_daemon = mps_record;
      plan.prepared.push_back(std::move(p));
      plan.configs.push_back(&g.config);
    }
  }
  if (gates().Enabled(std::string(api::gate::kDeviceMetadata))) {
    plan.metadata = MetadataOf(claim, options_.driver_name, plan.groups, plan.prepared);
  }
  // Before any step: a claim the steps cannot be planned for (fabricPartition: its GPUs match
  // no partition) fails with nothing changed.
  ASSIGN_OR_RETURN(plan.steps, StepsOf(uid, plan, mps_ready_deadline));
  return plan;
}

absl::Status DeviceState::PlanVfio(const std::string& uid, Plan& plan) const {
  int vfio_groups = 0;
  for (const ConfigGroup& g : plan.groups) {
    const auto* config = std::get_if<api::VfioDeviceConfig>(&g.config);
    if (config == nullptr) continue;
    ++vfio_groups;
    if (options_.vfio == nullptr || options_.vfio->host == nullptr) {
      return absl::InternalError(
          "VFIO passthrough requested but this plugin cannot bind GPUs to vfio (gate "
          "PassthroughSupport off or no host root)");
    }
    // Normalized: the policy and enableAPIDevice are set.
    const api::IommuConfig iommu = config->iommu.value_or(api::IommuConfig{});
    std::set<std::string> seen;
    for (const AllocatableDevice* d : g.devices) {
      if (!seen.insert(d->name).second) continue;
      ASSIGN_OR_RETURN(VfioTarget target, VfioTargetOf(inventory_, *options_.vfio, d->name));
      plan.vfio.push_back(std::move(target));
      plan.vfio_cdi.push_back({.device = d->name,
                               .pci = options_.vfio->devices.at(d->name),
                               .iommu = iommu,
                               .host_root = options_.vfio->host->host_root,
                               .iommufd_available = options_.vfio->iommufd_available});
    }
  }
  if (vfio_groups > 1) {
    return api::ConfigError("config", absl::StrCat("claim ", uid, " contains ", vfio_groups,
                                                   " VFIO device groups, but at most one is "
                                                   "supported per claim"));
  }
  return absl::OkStatus();
}

absl::StatusOr<GpuPlan> DeviceState::StepsOf(const std::string& uid, const Plan& plan,
                                             absl::Time mps_ready_deadline) const {
  ClaimStepsInput in{.claim_uid = uid,
                     .devices = plan.prepared,
                     .time_slices = plan.time_slices,
                     .mps_ready_deadline = mps_ready_deadline};
  for (const Plan::Daemon& d : plan.daemons) {
    in.mps.push_back({.daemon = d.daemon.get(),
                      .device_names = d.device_names,
                      .dynamic_group = d.dynamic_group});
  }
  // One CDI device per allocated device: with consumable shares, two requests of the claim may
  // have been given the same device, and CDI device names must be unique within the spec.
  std::set<std::string> in_spec;
  for (const RecordedDevice& p : plan.prepared) {
    if (in_spec.insert(p.kubelet.device_name).second) in.cdi_devices.push_back(p);
  }
  if (options_.services.device_status != nullptr && options_.write_device_status) {
    in.status_claim = plan.status_claim;
    in.device_statuses = plan.device_statuses;
  }
  in.metadata = plan.metadata;
  in.vfio = plan.vfio;
  in.vfio_cdi = plan.vfio_cdi;
  return GpuClaimSteps(in, options_.services);
}

bool DeviceState::time_slicing_gate() const {
  return gates().Enabled(std::string(api::gate::kTimeSlicingSettings));
}

absl::StatusOr<std::vector<RecordedDevice>> DeviceState::PrepareLocked(
    const k8s::ResourceClaim& claim, const Deadline& deadline) {
  const std::string& uid = claim.metadata.uid;
  // One read serves the idempotency check, the overlap check and the undo of time-slices.
  ASSIGN_OR_RETURN(checkpoint::ClaimMap all, checkpoint_->List());
  const auto existing = all.find(uid);
  if (existing != all.end() && existing->second.state == ClaimState::kPrepareCompleted) {
    DRA_VLOG(4, "claim already prepared", "claim", uid);
    return PreparedDevicesFromJson(existing->second.prepared_devices);
  }
  // Counted from here: the kubelet's timeout started before this call.
  const absl::Time mps_deadline =
      deadline.CapTime(options_.clock->Now() + options_.mps_ready_timeout);
  // Resolve the configs and plan the devices, then refuse devices other claims hold: no side
  // effects.
  std::optional<TraceStage> configs_stage(std::in_place, "configs");
  ASSIGN_OR_RETURN(Plan plan, PlanLocked(claim, mps_deadline));
  RETURN_IF_ERROR(CheckOverlap(uid, all, plan.prepared, plan.configs));
  RETURN_IF_ERROR(CheckMigIntervals(claim, all, plan.mig_intervals));
  {  // PassthroughSupport: a GPU and its gpu-vfio sibling are one device (vfio_claim.h).
    std::vector<std::string> names;
    for (const RecordedDevice& p : plan.prepared) names.push_back(p.kubelet.device_name);
    RETURN_IF_ERROR(CheckSiblingsFree(inventory_, uid, names, all));
  }
  configs_stage.reset();
  if (!plan.time_slices.empty() && options_.services.time_slicing == nullptr) {
    return absl::InternalError("time-slicing requested but this plugin has no nvidia-smi runner");
  }
  // Nothing has changed yet: a prepare past its deadline stops here without a trace.
  RETURN_IF_ERROR(deadline.Check("set up devices"));

  // The steps (claim_steps.h's table, planned with the devices), as the claim needs them; the
  // engine records PrepareStarted before the external ones and PrepareCompleted after the last. A
  // prepare that failed or crashed half-way left a record: the engine finishes the steps this plan
  // repeats and undoes the others first.
  std::vector<prepare::StepRecord> recorded;
  if (existing != all.end()) recorded = RecordedSteps(existing->second, time_slicing_gate());
  checkpoint::PreparedClaim base{.uid = uid,
                                 .namespace_name = claim.metadata.namespace_name,
                                 .name = claim.metadata.name,
                                 .allocation = claim.ToJson()["status"]["allocation"],
                                 .prepared_devices = PreparedDevicesToJson(plan.prepared)};
  ClaimJournal journal(checkpoint_, std::move(base), [this](const checkpoint::ClaimMap& claims) {
    CountPreparedDevices(claims);
  });
  const prepare::StepUndoers undoers = GpuClaimUndoers(uid, all, options_.services);
  prepare::StepEngine engine(&journal, &undoers);
  RETURN_IF_ERROR(engine.Run(recorded, plan.steps.steps, deadline));
  DRA_INFO("prepared claim", "claim", uid, "namespace", claim.metadata.namespace_name, "name",
           claim.metadata.name, "devices", plan.prepared.size());
  return plan.prepared;
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
    for (const RecordedDevice& d : *devices) ++counts[DeviceTypeName(d.type)];
  }
  if (options_.on_held_devices) options_.on_held_devices(RecordedDeviceNames(claims));
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
  absl::StatusOr<Plan> plan = PlanLocked(claim, absl::InfiniteFuture());
  if (!plan.ok()) {
    return Annotate(plan.status(),
                    absl::StrCat("rebuild the record of claim ", claim.metadata.namespace_name, "/",
                                 claim.metadata.name, " (", uid, ")"));
  }
  nlohmann::json allocation = claim.ToJson()["status"]["allocation"];
  bool added = false;
  RETURN_IF_ERROR(checkpoint_->Update(
      [&](checkpoint::ClaimMap& claims) {
        if (claims.contains(uid)) return absl::OkStatus();  // recorded meanwhile: that record wins
        checkpoint::PreparedClaim& c = claims[uid];
        c.uid = uid;
        c.namespace_name = claim.metadata.namespace_name;
        c.name = claim.metadata.name;
        c.state = ClaimState::kPrepareCompleted;
        c.allocation = allocation;
        c.prepared_devices = PreparedDevicesToJson(plan->prepared);
        c.steps = prepare::StepRecordsToJson(AppliedRecords(plan->steps.steps));
        added = true;
        return absl::OkStatus();
      },
      [this](const checkpoint::ClaimMap& claims) { CountPreparedDevices(claims); }));
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
  // The recorded steps (for older records, those the devices imply) are undone in reverse: the
  // CDI spec, the MPS daemons, the time-slices. Full GPUs and static MIG devices need no other
  // teardown. A failure keeps the steps not undone recorded (PrepareStarted), so that the
  // kubelet's retry or the cleanup repeats the unprepare.
  const std::vector<prepare::StepRecord> recorded =
      RecordedSteps(existing->second, time_slicing_gate());
  ClaimJournal journal(checkpoint_, existing->second, [this](const checkpoint::ClaimMap& claims) {
    CountPreparedDevices(claims);
  });
  const prepare::StepUndoers undoers = GpuClaimUndoers(claim_uid, all, options_.services);
  prepare::StepEngine engine(&journal, &undoers);
  RETURN_IF_ERROR(engine.UndoAll(recorded));
  // A spec written by a prepare that ended before recording it completed is not in its record.
  const bool spec_recorded =
      std::any_of(recorded.begin(), recorded.end(),
                  [](const prepare::StepRecord& r) { return r.name == kCdiSpecStep; });
  if (!spec_recorded) RETURN_IF_ERROR(cdi_->Remove(claim_uid));
  RETURN_IF_ERROR(journal.Forget());
  DRA_INFO("unprepared claim", "claim", claim_uid, "namespace", existing->second.namespace_name,
           "name", existing->second.name, "state",
           checkpoint::ClaimStateName(existing->second.state));
  return absl::OkStatus();
}

}  // namespace dra::gpu
