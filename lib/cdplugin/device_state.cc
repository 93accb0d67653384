#include "lib/cdplugin/device_state.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/cdplugin/errors.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::cdplugin {
namespace {

nlohmann::json AllocationJson(const k8s::ResourceClaim& claim) {
  if (!claim.status.allocation.has_value()) return nullptr;
  nlohmann::json j = claim.ToJson();
  if (!j.contains("status") || !j["status"].contains("allocation")) return nullptr;
  return j["status"]["allocation"];
}

std::vector<kubeletplugin::PreparedDevice> ToPrepared(const ClaimRecord& record) {
  std::vector<kubeletplugin::PreparedDevice> out;
  for (const RecordedDevice& d : record.devices) out.push_back(d.kubelet);
  return out;
}

std::string DomainRef(const k8s::ComputeDomain& cd) {
  return absl::StrCat(cd.metadata.namespace_name, "/", cd.metadata.name, " (", cd.metadata.uid,
                      ")");
}

// The claim's checkpoint entry as the prepare's journal: every write records `base` (identity,
// allocation) with the devices, the phase and the steps. The first Started write also checks, in
// the same read-modify-write, that no exclusive device of the claim is held by another
// PrepareCompleted claim, so that two claims cannot both take a device.
class ClaimJournal final : public prepare::StepJournal {
 public:
  // `context` (the CDI IDs for the Completed record) must outlive the journal.
  ClaimJournal(checkpoint::Checkpoint* checkpoint, checkpoint::PreparedClaim base,
               std::vector<RecordedDevice> devices, std::vector<bool> exclusive,
               const ClaimContext* context)
      : checkpoint_(checkpoint),
        base_(std::move(base)),
        devices_(std::move(devices)),
        exclusive_(std::move(exclusive)),
        context_(context) {}

  absl::Status Started(const std::vector<prepare::StepRecord>& steps) override {
    RETURN_IF_ERROR(
        Write(ClaimRecord{.phase = Phase::kStarted, .devices = devices_}, steps, !checked_));
    checked_ = true;
    return absl::OkStatus();
  }
  absl::Status Completed(const std::vector<prepare::StepRecord>& steps) override {
    return Write(
        ClaimRecord{.phase = Phase::kCompleted, .devices = WithCdiIds(devices_, *context_)}, steps,
        /*check_conflicts=*/false);
  }
  absl::Status Forget() override {
    return checkpoint_->Update([&](checkpoint::ClaimMap& claims) -> absl::Status {
      claims.erase(base_.uid);
      return absl::OkStatus();
    });
  }

 private:
  absl::Status Write(const ClaimRecord& record, const std::vector<prepare::StepRecord>& steps,
                     bool check_conflicts) {
    return checkpoint_->Update([&](checkpoint::ClaimMap& claims) -> absl::Status {
      if (check_conflicts) RETURN_IF_ERROR(CheckConflicts(claims));
      checkpoint::PreparedClaim& c = claims[base_.uid];
      c = ToCheckpoint(record, base_.uid, base_.namespace_name, base_.name, base_.allocation);
      c.steps = prepare::StepRecordsToJson(steps);
      return absl::OkStatus();
    });
  }

  absl::Status CheckConflicts(const checkpoint::ClaimMap& claims) const {
    for (const auto& [other_uid, other] : claims) {
      if (other_uid == base_.uid || other.state != checkpoint::ClaimState::kPrepareCompleted) {
        continue;
      }
      absl::StatusOr<ClaimRecord> other_record = DecodeRecord(other);
      if (!other_record.ok()) continue;
      for (size_t i = 0; i < devices_.size(); ++i) {
        const RecordedDevice& mine = devices_[i];
        if (!exclusive_[i]) continue;
        for (const RecordedDevice& theirs : other_record->devices) {
          if (mine.kubelet.pool_name == theirs.kubelet.pool_name &&
              mine.kubelet.device_name == theirs.kubelet.device_name) {
            return RetryableError(absl::StrCat(
                DeviceTypeName(mine.type), " ", mine.id, " already allocated by claim ", other_uid,
                " (according to checkpoint); requested device ", mine.kubelet.device_name,
                " is already allocated to a different claim"));
          }
        }
      }
    }
    return absl::OkStatus();
  }

  checkpoint::Checkpoint* const checkpoint_;
  const checkpoint::PreparedClaim base_;
  const std::vector<RecordedDevice> devices_;
  const std::vector<bool> exclusive_;
  const ClaimContext* const context_;
  bool checked_ = false;
};

// Unprepare's journal: a failed undo leaves the claim's record as it was (every undo may be
// repeated, so the retried unprepare undoes it all again), and a prepared claim stays prepared.
class KeepRecordJournal final : public prepare::StepJournal {
 public:
  absl::Status Started(const std::vector<prepare::StepRecord>& /*steps*/) override {
    return absl::OkStatus();
  }
  absl::Status Completed(const std::vector<prepare::StepRecord>& /*steps*/) override {
    return absl::OkStatus();
  }
  absl::Status Forget() override { return absl::OkStatus(); }
};

}  // namespace

DeviceState::DeviceState(DeviceStateOptions options, checkpoint::Checkpoint* checkpoint,
                         CdiSpecs* cdi, DomainApi* api)
    : options_(std::move(options)),
      checkpoint_(checkpoint),
      cdi_(cdi),
      api_(api),
      clock_(options_.clock != nullptr ? options_.clock : RealClock::Get()),
      clique_id_(options_.clique_id) {}

std::string DeviceState::clique_id() const {
  absl::MutexLock lock(&clique_mu_);
  return clique_id_;
}

bool DeviceState::SetCliqueId(const std::string& clique_id) {
  absl::MutexLock lock(&clique_mu_);
  if (clique_id.empty() || clique_id == clique_id_) return false;
  DRA_INFO("NVLink clique ID changed", "from", clique_id_, "to", clique_id);
  clique_id_ = clique_id;
  return true;
}

std::string DeviceState::DomainDir(const std::string& cd_uid) const {
  return absl::StrCat(DomainsDir(), "/", cd_uid);
}

std::shared_ptr<absl::Mutex> DeviceState::ClaimMutex(const std::string& uid) {
  absl::MutexLock lock(&claims_mu_);
  auto& m = claim_mutexes_[uid];
  if (!m) m = std::make_shared<absl::Mutex>();
  return m;
}

StepEnv DeviceState::Env() const {
  return {.api = api_,
          .cdi = cdi_,
          .checkpoint = checkpoint_,
          .root = options_.root,
          .host_imex = options_.host_imex,
          .node_name = options_.node_name,
          .imex_channels_major = options_.imex_channels_major,
          .domains_dir = DomainsDir(),
          .clique_id = clique_id()};
}

absl::StatusOr<std::vector<kubeletplugin::PreparedDevice>> DeviceState::Prepare(
    const k8s::ResourceClaim& claim) {
  const std::string& uid = claim.metadata.uid;
  const std::string ref = absl::StrCat(claim.metadata.namespace_name, "/", claim.metadata.name);
  std::shared_ptr<absl::Mutex> claim_mu = ClaimMutex(uid);
  absl::MutexLock claim_lock(claim_mu.get());

  const nlohmann::json allocation = AllocationJson(claim);
  // The steps an unfinished earlier prepare recorded: the engine finishes them.
  std::vector<prepare::StepRecord> recorded;
  ASSIGN_OR_RETURN(std::optional<checkpoint::PreparedClaim> existing, checkpoint_->Get(uid));
  if (existing.has_value()) {
    absl::StatusOr<ClaimRecord> decoded = DecodeRecord(*existing);
    if (!decoded.ok()) {
      // Written by another version, or edited: prepared again from scratch (idempotent steps).
      DRA_WARNING("ignoring an undecodable checkpoint record; preparing again", "claim", ref, "err",
                  decoded.status());
      decoded = ClaimRecord();
    } else if (decoded->phase == Phase::kStarted) {
      recorded = RecordedSteps(*existing, *decoded, host_managed());
    }
    const ClaimRecord& record = *decoded;
    if (record.phase == Phase::kCompleted) return ToPrepared(record);
    if (record.phase == Phase::kAborted && existing->allocation == allocation) {
      return PermanentError(absl::StrCat("stale prepare for claim ", ref, " (", uid,
                                         "): claim prepare was already aborted"));
    }
  }
  if (!claim.status.allocation.has_value()) {
    return PermanentError(absl::StrCat("no allocation set in ResourceClaim ", ref));
  }
  absl::StatusOr<std::vector<ConfiguredDevice>> configured =
      ConfigureDevices(*claim.status.allocation, /*strict=*/true);
  if (!configured.ok()) return Annotate(configured.status(), absl::StrCat("claim ", ref));
  std::vector<RecordedDevice> devices;
  // exclusive[i]: devices[i] may not be shared (adminAccess claims, monitoring, may share).
  std::vector<bool> exclusive;
  std::map<std::string, std::shared_ptr<const k8s::ComputeDomain>> channel_domains;
  for (const ConfiguredDevice& d : *configured) {
    devices.push_back(RecordDevice(d, options_.node_name));
    exclusive.push_back(!d.result.admin_access.value_or(false));
    if (d.type == DeviceType::kDaemon && host_managed()) {
      return PermanentError(absl::StrCat("claim ", ref,
                                         ": ComputeDomain daemon claims are not supported when "
                                         "imex.mode=hostManaged"));
    }
    // A daemon device hands out the domain's IMEX directory and the fabric-imex-mgmt capability:
    // only the driver's own IMEX DaemonSets, in the driver namespace, may claim one.
    if (d.type == DeviceType::kDaemon &&
        (options_.driver_namespace.empty() ||
         claim.metadata.namespace_name != options_.driver_namespace)) {
      return PermanentError(absl::StrCat(
          "claim ", ref, ", device ", d.result.device,
          ": a ComputeDomain daemon device may only be claimed in the driver namespace \"",
          options_.driver_namespace,
          "\" (by the IMEX daemons the driver runs there), not in namespace \"",
          claim.metadata.namespace_name,
          "\"; a workload claims an IMEX channel (DeviceClass "
          "compute-domain-default-channel.nvidia.com) of a ComputeDomain in its own namespace"));
    }
    if (d.type != DeviceType::kChannel) continue;
    auto domain = api_->FindDomain(d.domain_id());
    if (domain == nullptr) {
      return PermanentError(
          absl::StrCat("claim ", ref, ": ComputeDomain not found: ", d.domain_id()));
    }
    if (domain->metadata.namespace_name != claim.metadata.namespace_name) {
      return PermanentError(absl::StrCat("claim ", ref,
                                         ": the ResourceClaim's namespace is different than the "
                                         "ComputeDomain's namespace (ComputeDomain ",
                                         DomainRef(*domain), ")"));
    }
    channel_domains[d.domain_id()] = std::move(domain);
  }

  const StepEnv env = Env();
  ClaimPlan plan;
  RETURN_IF_ERROR(PlanClaimSteps(
      {.uid = uid, .ref = ref, .devices = devices, .channel_domains = std::move(channel_domains)},
      env, &plan));
  ClaimJournal journal(checkpoint_,
                       checkpoint::PreparedClaim{.uid = uid,
                                                 .namespace_name = claim.metadata.namespace_name,
                                                 .name = claim.metadata.name,
                                                 .allocation = allocation},
                       devices, std::move(exclusive), &plan.context);
  // Step 4: the conflict check and the PrepareStarted record, in one read-modify-write.
  RETURN_IF_ERROR(journal.Started(recorded));
  const prepare::StepUndoers undoers = ClaimUndoers(env, uid);
  prepare::StepEngine engine(&journal, &undoers);
  RETURN_IF_ERROR(engine.Run(recorded, plan.steps, Deadline::Infinite()));
  DRA_INFO("prepared claim", "claim", ref, "uid", uid, "devices", devices.size());
  return ToPrepared(
      ClaimRecord{.phase = Phase::kCompleted, .devices = WithCdiIds(devices, plan.context)});
}

absl::Status DeviceState::Unprepare(const std::string& uid) {
  std::shared_ptr<absl::Mutex> claim_mu = ClaimMutex(uid);
  absl::MutexLock claim_lock(claim_mu.get());
  ASSIGN_OR_RETURN(std::optional<checkpoint::PreparedClaim> existing, checkpoint_->Get(uid));
  if (!existing.has_value()) return absl::OkStatus();
  absl::StatusOr<ClaimRecord> decoded = DecodeRecord(*existing);
  if (!decoded.ok()) {
    // Nothing can be undone from it; what stays behind (a node label) is the controller's
    // stale-label cleanup's. Retrying could never succeed and would keep the pod terminating.
    DRA_WARNING("dropping an undecodable checkpoint record at unprepare", "uid", uid, "err",
                decoded.status());
    RETURN_IF_ERROR(cdi_->RemoveClaimSpec(uid));
    return checkpoint_->Update([&](checkpoint::ClaimMap& claims) -> absl::Status {
      claims.erase(uid);
      return absl::OkStatus();
    });
  }
  const ClaimRecord record = *std::move(decoded);
  if (record.phase == Phase::kAborted) {
    DRA_VLOG(2, "unprepare noop: claim in PrepareAborted state", "uid", uid);
    return absl::OkStatus();
  }
  const StepEnv env = Env();
  const prepare::StepUndoers undoers = ClaimUndoers(env, uid);
  KeepRecordJournal journal;
  prepare::StepEngine engine(&journal, &undoers);
  RETURN_IF_ERROR(engine.UndoAll(RecordedSteps(*existing, record, host_managed())));
  // Unconditionally: a crash during the spec's write leaves a spec that no record names.
  RETURN_IF_ERROR(cdi_->RemoveClaimSpec(uid));
  const bool completed = record.phase == Phase::kCompleted;
  RETURN_IF_ERROR(checkpoint_->Update([&](checkpoint::ClaimMap& claims) -> absl::Status {
    auto it = claims.find(uid);
    if (it == claims.end()) return absl::OkStatus();
    if (completed) {
      claims.erase(it);
      return absl::OkStatus();
    }
    ClaimRecord aborted = record;
    aborted.phase = Phase::kAborted;
    aborted.aborted_at = clock_->Now();
    for (RecordedDevice& d : aborted.devices) d.kubelet.cdi_device_ids.clear();
    it->second = ToCheckpoint(aborted, uid, it->second.namespace_name, it->second.name,
                              it->second.allocation);
    return absl::OkStatus();
  }));
  DRA_INFO("unprepared claim", "uid", uid, "was", PhaseName(record.phase));
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, int>> DeviceState::PreparedDeviceCounts() const {
  ASSIGN_OR_RETURN(checkpoint::ClaimMap claims, checkpoint_->List());
  std::map<std::string, int> counts = {{"channel", 0}, {"daemon", 0}, {"unknown", 0}};
  for (const auto& [uid, c] : claims) {
    if (c.state != checkpoint::ClaimState::kPrepareCompleted) continue;
    absl::StatusOr<ClaimRecord> r = DecodeRecord(c);
    if (!r.ok()) {
      ++counts["unknown"];
      continue;
    }
    for (const RecordedDevice& d : r->devices) ++counts[DeviceTypeName(d.type)];
  }
  return counts;
}

}  // namespace dra::cdplugin
