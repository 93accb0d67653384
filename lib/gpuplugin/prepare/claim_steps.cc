#include "lib/gpuplugin/prepare/claim_steps.h"

#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::gpu {
namespace {

using checkpoint::ClaimState;
using DeviceEdits = std::map<std::string, cdi::ContainerEdits>;

class TimeSlicingStep final : public prepare::PlanStep {
 public:
  TimeSlicingStep(std::string uid, std::vector<TimeSliceGroup> groups, const TimeSlicing* ts)
      : uid_(std::move(uid)), groups_(std::move(groups)), time_slicing_(ts) {}
  std::string name() const override { return kTimeSlicingStep; }
  nlohmann::json UndoData() const override {
    nlohmann::json out = nlohmann::json::array();
    for (const TimeSliceGroup& g : groups_) {
      nlohmann::json group = {{"interval", api::TimeSliceIntervalName(g.interval)},
                              {"gpus", g.gpu_uuids}};
      if (g.mig_parents) group["migParents"] = true;
      out.push_back(std::move(group));
    }
    return out;
  }
  bool external() const override { return true; }
  bool resumable() const override { return true; }  // stops at the failed GPU; the retry goes on
  absl::Status Apply(const Deadline& deadline) override {
    if (time_slicing_ == nullptr) {
      return absl::InternalError("time-slicing requested but this plugin has no nvidia-smi runner");
    }
    for (const TimeSliceGroup& g : groups_) {
      if (g.mig_parents) {
        RETURN_IF_ERROR(time_slicing_->SetInterval(g.gpu_uuids, g.interval, deadline));
        DRA_INFO("applied MIG parent GPU time-slice", "claim", uid_, "interval",
                 api::TimeSliceIntervalName(g.interval), "gpus", absl::StrJoin(g.gpu_uuids, ","));
        continue;
      }
      RETURN_IF_ERROR(time_slicing_->Apply(g.gpu_uuids, g.interval, deadline));
      DRA_INFO("applied GPU time-slicing", "claim", uid_, "interval",
               api::TimeSliceIntervalName(g.interval), "gpus", g.gpu_uuids.size());
    }
    return absl::OkStatus();
  }

 private:
  const std::string uid_;
  const std::vector<TimeSliceGroup> groups_;
  const TimeSlicing* const time_slicing_;
};

class MpsDaemonsStep final : public prepare::PlanStep {
 public:
  MpsDaemonsStep(std::string uid, std::vector<MpsGroup> groups, absl::Time ready_deadline,
                 DeviceEdits* edits, const MpsDaemons* mps, const CreatedMigDevices* created_mig)
      : uid_(std::move(uid)),
        groups_(std::move(groups)),
        ready_deadline_(ready_deadline),
        edits_(edits),
        mps_(mps),
        created_mig_(created_mig) {}
  std::string name() const override { return kMpsDaemonsStep; }
  nlohmann::json UndoData() const override {
    nlohmann::json out = nlohmann::json::array();
    for (const MpsGroup& g : groups_) out.push_back(MpsDaemonRecordToJson(g.daemon->Record()));
    return out;
  }
  bool external() const override { return true; }
  // Start completes a partial start, and a daemon that was merely slow (an image pull) gets its
  // chance to become ready at the retry.
  bool resumable() const override { return true; }
  absl::Status Apply(const Deadline& deadline) override {
    for (const MpsGroup& g : groups_) {
      const std::string id = g.daemon->Record().id;
      RETURN_IF_ERROR(deadline.Check("start MPS daemon " + id));
      MpsDaemon* daemon = g.daemon;
      if (g.dynamic_group) {
        // Its MIG devices exist now (migDevices ran before): the daemon gets their UUIDs.
        if (mps_ == nullptr) return absl::InternalError("no MPS daemons to start " + id);
        std::map<std::string, std::string> uuids;
        for (const auto& [name, info] : *created_mig_) uuids[name] = info.uuid;
        MpsDaemonGroup group = *g.dynamic_group;
        group.id = id;
        ASSIGN_OR_RETURN(group, WithCreatedMigUuids(std::move(group), uuids));
        ASSIGN_OR_RETURN(std::unique_ptr<MpsDaemon> made, mps_->Create(std::move(group)));
        daemon = made.get();
        resolved_.push_back(std::move(made));
      }
      RETURN_IF_ERROR(daemon->Start());
      RETURN_IF_ERROR(daemon->AssertReady(ready_deadline_));
      const cdi::ContainerEdits edits = daemon->ContainerEdits();
      for (const std::string& name : g.device_names) (*edits_)[name].Append(edits);
      DRA_INFO("MPS control daemon ready", "claim", uid_, "id", id, "devices",
               g.device_names.size());
    }
    return absl::OkStatus();
  }

 private:
  const std::string uid_;
  const std::vector<MpsGroup> groups_;
  const absl::Time ready_deadline_;
  DeviceEdits* const edits_;
  const MpsDaemons* const mps_;
  const CreatedMigDevices* const created_mig_;
  std::vector<std::unique_ptr<MpsDaemon>> resolved_;  // the daemons of dynamic_group
};

class CdiSpecStep final : public prepare::PlanStep {
 public:
  CdiSpecStep(std::string uid, std::vector<RecordedDevice> devices, const ClaimCdi* cdi,
              const DeviceEdits* edits, const CreatedMigDevices* created_mig)
      : uid_(std::move(uid)),
        devices_(std::move(devices)),
        cdi_(cdi),
        edits_(edits),
        created_mig_(created_mig) {}
  std::string name() const override { return kCdiSpecStep; }
  nlohmann::json UndoData() const override { return nullptr; }
  bool external() const override { return false; }
  bool resumable() const override { return false; }  // written atomically: all or nothing
  absl::Status Apply(const Deadline& deadline) override {
    RETURN_IF_ERROR(deadline.Check("write the CDI spec"));
    // Dynamic MIG devices are named by what migDevices created (UUID, instance ids).
    return cdi_->Write(uid_, WithCreatedMig(devices_, *created_mig_), *edits_).status();
  }

 private:
  const std::string uid_;
  const std::vector<RecordedDevice> devices_;
  const ClaimCdi* const cdi_;
  const DeviceEdits* const edits_;
  const CreatedMigDevices* const created_mig_;
};

class DeviceStatusStep final : public prepare::PlanStep {
 public:
  DeviceStatusStep(StatusClaimRef claim, std::vector<DeviceStatusEntry> entries,
                   const DeviceStatusWriter* writer, const CreatedMigDevices* created_mig)
      : claim_(std::move(claim)),
        entries_(std::move(entries)),
        writer_(writer),
        created_mig_(created_mig) {}
  std::string name() const override { return kDeviceStatusStep; }
  // With the entries: a restart writes them again when the queued write was lost.
  nlohmann::json UndoData() const override {
    return DeviceStatusRecordToJson(claim_, WithCreatedMigUuids(entries_));
  }
  bool external() const override { return true; }    // the API server's copy of the claim
  bool resumable() const override { return false; }  // never fails
  // Runs after the Completed record (lib/prepare/plan.h): one checkpoint write per prepare.
  bool best_effort() const override { return true; }
  // Best effort: the entries are informational, and a pod must not wait for (or fail on) them.
  absl::Status Apply(const Deadline& deadline) override {
    // A write is bounded by the status client's request timeout (5 s, plugin_app.cc); with less
    // left, it could only make the kubelet's prepare call time out.
    absl::Status s = deadline.Left() < kDeviceStatusWriteTime
                         ? absl::DeadlineExceededError(absl::StrCat(
                               "less than ", absl::FormatDuration(kDeviceStatusWriteTime),
                               " left before the deadline of ", deadline.what()))
                         : absl::OkStatus();
    if (s.ok() && writer_ == nullptr) {
      s = absl::FailedPreconditionError("this plugin has no device status writer");
    }
    if (s.ok()) s = writer_->Write(claim_, WithCreatedMigUuids(entries_));
    if (!s.ok()) {
      DRA_WARNING("claim device status not written; the claim is prepared without it", "claim",
                  claim_.uid, "namespace", claim_.namespace_name, "name", claim_.name, "err", s);
      return absl::OkStatus();
    }
    DRA_VLOG(2, "queued claim device status", "claim", claim_.uid, "devices", entries_.size());
    return absl::OkStatus();
  }

 private:
  const StatusClaimRef claim_;
  const std::vector<DeviceStatusEntry> entries_;
  const DeviceStatusWriter* const writer_;
  const CreatedMigDevices* const created_mig_;

  // Dynamic MIG devices get the UUID migDevices created (unknown when the entries were planned).
  std::vector<DeviceStatusEntry> WithCreatedMigUuids(std::vector<DeviceStatusEntry> entries) const {
    for (DeviceStatusEntry& e : entries) {
      auto it = created_mig_->find(e.device);
      if (it != created_mig_->end()) e.data["uuid"] = it->second.uuid;
    }
    return entries;
  }
};

// Undo of deviceStatus: remove this driver's entries from the claim, if it is still there.
absl::Status RemoveDeviceStatus(const DeviceStatusWriter* writer, const nlohmann::json& undo) {
  ASSIGN_OR_RETURN(StatusClaimRef claim, StatusClaimRefFromJson(undo));
  if (writer == nullptr) {
    DRA_WARNING("cannot remove the claim's device status: this plugin has no writer", "claim",
                claim.uid, "namespace", claim.namespace_name, "name", claim.name);
    return absl::OkStatus();
  }
  absl::Status s = writer->Remove(claim);
  // Without the permission (an old ClusterRole) nothing was written either: not worth an
  // unprepare that never ends.
  if (absl::IsPermissionDenied(s)) {
    DRA_WARNING("not allowed to remove the claim's device status", "claim", claim.uid, "err", s);
    return absl::OkStatus();
  }
  return Annotate(s, "remove the claim's device status");
}

// UUIDs of the full GPUs that PrepareCompleted claims other than `uid` hold, not as adminAccess.
std::set<std::string> GpusHeldByOthers(const std::string& uid, const checkpoint::ClaimMap& all) {
  std::set<std::string> held;
  for (const auto& [other_uid, other] : all) {
    if (other_uid == uid || other.state != ClaimState::kPrepareCompleted) continue;
    auto devices = PreparedDevicesFromJson(other.prepared_devices);
    if (!devices.ok()) continue;
    for (const RecordedDevice& d : *devices) {
      // An adminAccess claim observes the GPU and relies on none of its settings.
      if (d.type == DeviceType::kGpu && !d.admin_access) held.insert(d.uuid);
    }
  }
  return held;
}

// A recorded timeSlicing group of MIG parent GPUs ({"migParents": true}); any other value, or
// none, is a group of full GPUs.
bool IsMigParentsGroup(const nlohmann::json& group) {
  auto it = group.find("migParents");
  return it != group.end() && it->is_boolean() && it->get<bool>();
}

absl::StatusOr<std::vector<std::string>> StringList(const nlohmann::json& j,
                                                    const std::string& path) {
  if (!j.is_array()) return absl::InvalidArgumentError(path + ": expected a list");
  std::vector<std::string> out;
  for (const nlohmann::json& e : j) {
    if (!e.is_string()) return absl::InvalidArgumentError(path + ": expected strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

// Undo of timeSlicing: reset the recorded GPUs that no other completed claim holds. A MIG parent
// ("migParents" group) gets its interval alone reset, and only when no other completed claim holds
// it as a full GPU or holds a non-Default interval on it.
absl::Status ResetTimeSlices(const std::string& uid, const checkpoint::ClaimMap& all,
                             const TimeSlicing* time_slicing, const nlohmann::json& undo) {
  if (!undo.is_array()) return absl::InvalidArgumentError("timeSlicing undo: expected a list");
  std::vector<std::string> reset, reset_parents;
  std::set<std::string> seen, seen_parents;
  std::optional<std::set<std::string>> held;
  std::optional<std::map<std::string, HeldMigInterval>> held_intervals;
  for (const nlohmann::json& group : undo) {
    if (!group.is_object() || !group.contains("gpus")) {
      return absl::InvalidArgumentError("timeSlicing undo: expected {\"gpus\": [...]} groups");
    }
    ASSIGN_OR_RETURN(std::vector<std::string> gpus,
                     StringList(group["gpus"], "timeSlicing undo: gpus"));
    const bool mig_parents = IsMigParentsGroup(group);
    for (const std::string& uuid : gpus) {
      if (!(mig_parents ? seen_parents : seen).insert(uuid).second) continue;
      if (!held) held = GpusHeldByOthers(uid, all);
      if (held->contains(uuid)) {
        DRA_VLOG(2, "GPU still used by another claim; keeping its time-slice", "claim", uid, "uuid",
                 uuid);
        continue;
      }
      if (mig_parents) {
        if (!held_intervals) held_intervals = MigParentIntervalsHeld(uid, all);
        if (auto it = held_intervals->find(uuid); it != held_intervals->end()) {
          DRA_VLOG(2, "MIG parent GPU's interval still held by another claim; keeping it", "claim",
                   uid, "uuid", uuid, "holder", it->second.claim_uid, "interval",
                   api::TimeSliceIntervalName(it->second.interval));
          continue;
        }
        reset_parents.push_back(uuid);
        continue;
      }
      reset.push_back(uuid);
    }
  }
  if (reset.empty() && reset_parents.empty()) return absl::OkStatus();
  if (time_slicing == nullptr) {
    return absl::FailedPreconditionError(
        "GPU time-slices need a reset but this plugin has no nvidia-smi runner");
  }
  if (!reset.empty()) {
    RETURN_IF_ERROR(Annotate(time_slicing->Reset(reset), "reset GPU time-slice"));
    DRA_INFO("reset GPU time-slicing", "claim", uid, "gpus", reset.size());
  }
  if (!reset_parents.empty()) {
    RETURN_IF_ERROR(
        Annotate(time_slicing->SetInterval(reset_parents, api::TimeSliceInterval::kDefault),
                 "reset MIG parent GPU time-slice"));
    DRA_INFO("reset MIG parent GPU time-slice", "claim", uid, "gpus",
             absl::StrJoin(reset_parents, ","));
  }
  return absl::OkStatus();
}

// Undo of mpsDaemons: stop each recorded daemon.
absl::Status StopMpsDaemons(const MpsDaemons* mps, const nlohmann::json& undo) {
  if (!undo.is_array()) return absl::InvalidArgumentError("mpsDaemons undo: expected a list");
  for (const nlohmann::json& j : undo) {
    ASSIGN_OR_RETURN(MpsDaemonRecord record, MpsDaemonRecordFromJson(j));
    if (mps == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "MPS control daemon ", record.id, " needs a stop but this plugin has no MPS"));
    }
    RETURN_IF_ERROR(mps->Stop(record));
  }
  return absl::OkStatus();
}

}  // namespace

std::map<std::string, HeldMigInterval> MigParentIntervalsHeld(const std::string& uid,
                                                              const checkpoint::ClaimMap& all) {
  std::map<std::string, HeldMigInterval> held;
  for (const auto& [other_uid, other] : all) {
    if (other_uid == uid || other.state != ClaimState::kPrepareCompleted) continue;
    // Records without steps (older plugins, the Go driver) never set a MIG parent's interval.
    for (const prepare::StepRecord& step : RecordedSteps(other, /*time_slicing_gate=*/false)) {
      if (step.name != kTimeSlicingStep || !step.undo.is_array()) continue;
      for (const nlohmann::json& group : step.undo) {
        if (!group.is_object() || !IsMigParentsGroup(group)) continue;
        auto name = group.find("interval");
        const std::optional<api::TimeSliceInterval> interval =
            name != group.end() && name->is_string()
                ? api::ParseTimeSliceInterval(name->get<std::string>())
                : std::nullopt;
        if (!interval || *interval == api::TimeSliceInterval::kDefault) continue;
        auto list = group.find("gpus");
        absl::StatusOr<std::vector<std::string>> gpus =
            list != group.end() ? StringList(*list, "timeSlicing record: gpus")
                                : absl::InvalidArgumentError("timeSlicing record: no gpus");
        if (!gpus.ok()) {
          DRA_WARNING("unreadable MIG parent time-slice record", "claim", other_uid, "err",
                      gpus.status());
          continue;
        }
        for (const std::string& uuid : *gpus) {
          held.emplace(uuid, HeldMigInterval{.interval = *interval,
                                             .claim_uid = other_uid,
                                             .namespace_name = other.namespace_name,
                                             .name = other.name});
        }
      }
    }
  }
  return held;
}

namespace {

using Kind = GpuStepKind;
using prepare::PlanSteps;
using prepare::StepRecord;

// The kinds of step, in plan order. A plan function appends nothing when the claim does not need
// the kind; every undo must succeed for a step never applied (plan.h).
std::vector<Kind> MakeGpuStepTable() {
  std::vector<Kind> table;
  table.push_back(Kind{
      .names = {kFabricPartitionStep},
      .doc = {.when = "gate FabricManagerPartitioning, a claim with full or VFIO GPUs",
              .external = true,
              .apply = "activate the Fabric Manager partition whose GPUs are exactly the claim's "
                       "full GPUs and VFIO GPUs (`lib/gpuplugin/fabric/fabric_step.h`)",
              .undo = "deactivate it unless another claim records one of its GPUs"},
      .plan = [](const ClaimStepsInput& in, const ClaimStepServices& services, ClaimStepContext&,
                 PlanSteps& out) -> absl::Status {
        if (services.fabric == nullptr) return absl::OkStatus();
        // adminAccess devices activate no partition: that would change the GPUs under other
        // claims.
        std::vector<RecordedDevice> workload;
        for (const RecordedDevice& p : in.devices) {
          if (!p.admin_access) workload.push_back(p);
        }
        ASSIGN_OR_RETURN(std::optional<FabricTarget> target,
                         FabricTargetOf(*services.fabric, workload));
        if (target) out.push_back(FabricPartitionStep(*target, services.fabric->manager));
        return absl::OkStatus();
      },
      .undo =
          [](const GpuUndoEnv& env, const StepRecord& r) {
            return UndoFabricPartition(
                env.claim_uid, *env.others,
                env.services.fabric != nullptr ? env.services.fabric->manager : nullptr, r.undo);
          }});
  table.push_back(Kind{
      .names = {kMigDevicesStep},
      .doc = {.when = "gate DynamicMIG, a claim with dynamic MIG devices",
              .external = true,
              .resumable = true,
              .apply = "create each dynamic MIG device (MIG mode on if needed, GPU instance at the "
                       "allocated placement, compute instance), recording the MIG UUIDs "
                       "(`lib/gpuplugin/mig/mig_step.h`)",
              .undo = "destroy them by GPU, profile and placement; MIG mode off (Hopper+) when "
                      "the GPU has no instance left"},
      .plan =
          [](const ClaimStepsInput& in, const ClaimStepServices& services,
             ClaimStepContext& context, PlanSteps& out) {
            if (auto step = MigDevicesStep(in.cdi_devices, services.mig, &context.created_mig)) {
              out.push_back(std::move(step));
            }
            return absl::OkStatus();
          },
      .undo = [](const GpuUndoEnv& env,
                 const StepRecord& r) { return UndoMigDevices(env.services.mig, r.undo); }});
  table.push_back(Kind{
      .names = {kTimeSlicingStep},
      .doc = {.when = "a TimeSlicing config group, or a MigDeviceConfig group with a non-Default "
                      "interval",
              .external = true,
              .resumable = true,
              .apply = "nvidia-smi: compute mode DEFAULT and the group's interval on its full "
                       "GPUs; for a MigDeviceConfig group, that interval alone on the MIG "
                       "devices' parent GPUs (`lib/gpuplugin/timeslicing/time_slicing.h`)",
              .undo = "reset those GPUs that no other completed claim holds (a MIG parent: on "
                      "which no other completed claim holds a non-Default interval)"},
      .plan =
          [](const ClaimStepsInput& in, const ClaimStepServices& services, ClaimStepContext&,
             PlanSteps& out) {
            if (!in.time_slices.empty()) {
              out.push_back(std::make_unique<TimeSlicingStep>(in.claim_uid, in.time_slices,
                                                              services.time_slicing));
            }
            return absl::OkStatus();
          },
      .undo =
          [](const GpuUndoEnv& env, const StepRecord& r) {
            return ResetTimeSlices(env.claim_uid, *env.others, env.services.time_slicing, r.undo);
          }});
  table.push_back(Kind{
      .names = {kMpsDaemonsStep},
      .doc = {.when = "an MPS config group",
              .external = true,
              .resumable = true,
              .apply = "start each group's MPS control daemon, wait until it is ready, and add its "
                       "CDI edits to the group's devices (`lib/gpuplugin/mps/mps_sharing.h`)",
              .undo = "stop each daemon"},
      .plan =
          [](const ClaimStepsInput& in, const ClaimStepServices& services,
             ClaimStepContext& context, PlanSteps& out) {
            if (!in.mps.empty()) {
              out.push_back(std::make_unique<MpsDaemonsStep>(in.claim_uid, in.mps,
                                                             in.mps_ready_deadline, &context.edits,
                                                             services.mps, &context.created_mig));
            }
            return absl::OkStatus();
          },
      .undo = [](const GpuUndoEnv& env,
                 const StepRecord& r) { return StopMpsDaemons(env.services.mps, r.undo); }});
  table.push_back(Kind{
      .names = {kVfioModuleStep, kVfioPersistenceStep, kVfioUnbindStep, kVfioBindStep},
      .doc = {.when = "gate PassthroughSupport, per VFIO device, in this order",
              .external = true,
              .apply = "load the vfio module, persistence mode off, unbind the GPU from nvidia, "
                       "bind it to its vfio driver (`lib/gpuplugin/vfio/vfio_bind.h`)",
              .undo = "back to nvidia, persistence mode on"},
      .plan =
          [](const ClaimStepsInput& in, const ClaimStepServices& services, ClaimStepContext&,
             PlanSteps& out) {
            // Without a host DeviceState refused a VFIO claim before planning.
            if (services.vfio == nullptr) return absl::OkStatus();
            for (const VfioTarget& target : in.vfio) {
              for (auto& step : VfioBindSteps(target, services.vfio))
                out.push_back(std::move(step));
            }
            return absl::OkStatus();
          },
      .undo =
          [](const GpuUndoEnv& env, const StepRecord& r) {
            prepare::StepUndoers undoers;
            AddVfioUndoers(env.services.vfio, undoers);
            return undoers.at(r.name)(r.undo);
          },
      // Without a host, a record naming them cannot be undone (no undoer).
      .undo_available = [](const GpuUndoEnv& env) { return env.services.vfio != nullptr; }});
  table.push_back(Kind{
      .names = {kVfioCdiEditsStep},
      .doc = {.when = "gate PassthroughSupport, a claim with VFIO devices",
              .apply =
                  "the VFIO devices' CDI edits (`/dev/vfio/<group>` or the iommufd cdev read "
                  "after the bind; `lib/gpuplugin/vfio/vfio_claim.h`); the plugin's own state only",
              .undo = "nothing"},
      .plan =
          [](const ClaimStepsInput& in, const ClaimStepServices& services,
             ClaimStepContext& context, PlanSteps& out) {
            if (services.vfio != nullptr && !in.vfio_cdi.empty()) {
              out.push_back(VfioCdiEditsStep(in.vfio_cdi, &context.edits));
            }
            return absl::OkStatus();
          },
      .undo = [](const GpuUndoEnv&, const StepRecord&) { return absl::OkStatus(); }});
  table.push_back(Kind{.names = {kDeviceMetadataStep},
                       .doc = {.when = "gate DeviceMetadata",
                               .external = true,
                               .apply = "each request's metadata file and its CDI spec "
                                        "(`lib/gpuplugin/prepare/device_metadata.h`); the "
                                        "plugin's own files, recorded before they are written",
                               .undo = "remove them"},
                       .plan =
                           [](const ClaimStepsInput& in, const ClaimStepServices& services,
                              ClaimStepContext&, PlanSteps& out) {
                             if (in.metadata)
                               out.push_back(DeviceMetadataStep(*in.metadata, services.metadata));
                             return absl::OkStatus();
                           },
                       .undo =
                           [](const GpuUndoEnv& env, const StepRecord& r) {
                             return UndoDeviceMetadata(env.services.metadata, r.undo);
                           }});
  table.push_back(Kind{
      .names = {kCdiSpecStep},
      .doc = {.when = "always",
              .apply = "write the claim's CDI spec, one CDI device per distinct device, with the "
                       "edits of the steps before (`lib/gpuplugin/prepare/claim_cdi.h`); the "
                       "plugin's own file",
              .undo = "remove the spec"},
      .plan =
          [](const ClaimStepsInput& in, const ClaimStepServices& services,
             ClaimStepContext& context, PlanSteps& out) {
            out.push_back(std::make_unique<CdiSpecStep>(in.claim_uid, in.cdi_devices, services.cdi,
                                                        &context.edits, &context.created_mig));
            return absl::OkStatus();
          },
      .undo = [](const GpuUndoEnv& env,
                 const StepRecord&) { return env.services.cdi->Remove(env.claim_uid); }});
  table.push_back(Kind{
      .names = {kDeviceStatusStep},
      .doc = {.when = "`--device-status`",
              .external = true,
              .best_effort = true,
              .apply = "server-side apply of the claim's status.devices entries of this driver, "
                       "each with its data and a Ready condition "
                       "(`lib/gpuplugin/status/device_status.h`); a failed "
                       "write is a warning, never a failed prepare",
              .undo = "remove the entries (a claim that is gone is success)"},
      .plan =
          [](const ClaimStepsInput& in, const ClaimStepServices& services,
             ClaimStepContext& context, PlanSteps& out) {
            if (in.status_claim) {
              out.push_back(std::make_unique<DeviceStatusStep>(*in.status_claim, in.device_statuses,
                                                               services.device_status,
                                                               &context.created_mig));
            }
            return absl::OkStatus();
          },
      .undo =
          [](const GpuUndoEnv& env, const StepRecord& r) {
            return RemoveDeviceStatus(env.services.device_status, r.undo);
          }});
  return table;
}

}  // namespace

const std::vector<GpuStepKind>& GpuStepTable() {
  static const std::vector<GpuStepKind>* const kTable =
      new std::vector<GpuStepKind>(MakeGpuStepTable());
  return *kTable;
}

std::string GpuStepTableMarkdown() { return prepare::StepTableMarkdown(GpuStepTable()); }

absl::StatusOr<GpuPlan> GpuClaimSteps(const ClaimStepsInput& in,
                                      const ClaimStepServices& services) {
  GpuPlan plan;
  RETURN_IF_ERROR(prepare::PlanFromTable(GpuStepTable(), in, services, *plan.context, plan.steps));
  return plan;
}

prepare::StepUndoers GpuClaimUndoers(const std::string& claim_uid,
                                     const checkpoint::ClaimMap& others,
                                     const ClaimStepServices& services) {
  return prepare::UndoersFromTable(
      GpuStepTable(), GpuUndoEnv{.claim_uid = claim_uid, .others = &others, .services = services});
}

}  // namespace dra::gpu
