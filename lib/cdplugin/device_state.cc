#include "lib/cdplugin/device_state.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "lib/cdplugin/errors.h"
#include "lib/cdplugin/imex_config_template.h"
#include "lib/common/atomic_file.h"
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
  for (const RecordedDevice& d : record.devices) {
    out.push_back({.request_names = {d.request},
                   .pool_name = d.pool,
                   .device_name = d.device,
                   .cdi_device_ids = d.cdi_device_ids});
  }
  return out;
}

std::string DomainRef(const k8s::ComputeDomain& cd) {
  return absl::StrCat(cd.metadata.namespace_name, "/", cd.metadata.name, " (", cd.metadata.uid,
                      ")");
}

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

absl::StatusOr<std::vector<kubeletplugin::PreparedDevice>> DeviceState::Prepare(
    const k8s::ResourceClaim& claim) {
  const std::string& uid = claim.metadata.uid;
  const std::string ref = absl::StrCat(claim.metadata.namespace_name, "/", claim.metadata.name);
  std::shared_ptr<absl::Mutex> claim_mu = ClaimMutex(uid);
  absl::MutexLock claim_lock(claim_mu.get());

  const nlohmann::json allocation = AllocationJson(claim);
  ASSIGN_OR_RETURN(std::optional<checkpoint::PreparedClaim> existing, checkpoint_->Get(uid));
  if (existing.has_value()) {
    absl::StatusOr<ClaimRecord> decoded = DecodeRecord(*existing);
    if (!decoded.ok()) {
      // Written by another version, or edited: prepared again from scratch (idempotent steps).
      DRA_WARNING("ignoring an undecodable checkpoint record; preparing again", "claim", ref, "err",
                  decoded.status());
      decoded = ClaimRecord();
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
  ClaimRecord record;
  std::map<std::string, std::shared_ptr<const k8s::ComputeDomain>> channel_domains;
  for (const ConfiguredDevice& d : *configured) {
    record.devices.push_back(RecordDevice(d, options_.node_name));
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

  // Step 4: one read-modify-write, so two claims cannot both take a device.
  RETURN_IF_ERROR(checkpoint_->Update([&](checkpoint::ClaimMap& claims) -> absl::Status {
    for (const auto& [other_uid, other] : claims) {
      if (other_uid == uid || other.state != checkpoint::ClaimState::kPrepareCompleted) continue;
      absl::StatusOr<ClaimRecord> other_record = DecodeRecord(other);
      if (!other_record.ok()) continue;
      for (size_t i = 0; i < record.devices.size(); ++i) {
        const RecordedDevice& mine = record.devices[i];
        // adminAccess claims (monitoring) may share a device with its user.
        if ((*configured)[i].result.admin_access.value_or(false)) continue;
        for (const RecordedDevice& theirs : other_record->devices) {
          if (mine.pool == theirs.pool && mine.device == theirs.device) {
            return RetryableError(absl::StrCat(
                DeviceTypeName(mine.type), " ", mine.id, " already allocated by claim ", other_uid,
                " (according to checkpoint); requested device ", mine.device,
                " is already allocated to a different claim"));
          }
        }
      }
    }
    claims[uid] =
        ToCheckpoint(record, uid, claim.metadata.namespace_name, claim.metadata.name, allocation);
    return absl::OkStatus();
  }));

  std::map<std::string, cdi::ContainerEdits> edits;
  for (const RecordedDevice& d : record.devices) {
    absl::StatusOr<cdi::ContainerEdits> e =
        d.type != DeviceType::kChannel ? PrepareDaemon(d)
        : host_managed()               ? PrepareHostManagedChannel(d)
                                       : PrepareChannel(d, *channel_domains.at(d.domain_id));
    if (!e.ok()) return Annotate(e.status(), absl::StrCat("claim ", ref, ", device ", d.device));
    edits[d.device] = *std::move(e);
  }
  ASSIGN_OR_RETURN(auto ids, cdi_->WriteClaimSpec(uid, edits));
  for (RecordedDevice& d : record.devices) {
    d.cdi_device_ids.clear();
    if (d.type == DeviceType::kDaemon) d.cdi_device_ids.push_back(CdiSpecs::BaseDeviceId());
    if (auto it = ids.find(d.device); it != ids.end()) d.cdi_device_ids.push_back(it->second);
  }
  record.phase = Phase::kCompleted;
  RETURN_IF_ERROR(checkpoint_->Update([&](checkpoint::ClaimMap& claims) -> absl::Status {
    claims[uid] =
        ToCheckpoint(record, uid, claim.metadata.namespace_name, claim.metadata.name, allocation);
    return absl::OkStatus();
  }));
  DRA_INFO("prepared claim", "claim", ref, "uid", uid, "devices", record.devices.size());
  return ToPrepared(record);
}

absl::StatusOr<cdi::ContainerEdits> DeviceState::PrepareChannel(const RecordedDevice& d,
                                                                const k8s::ComputeDomain& domain) {
  RETURN_IF_ERROR(api_->AddNodeLabel(d.domain_id));
  const std::string clique = clique_id();
  absl::StatusOr<bool> ready = api_->DaemonReady(domain, clique);
  if (!ready.ok()) {
    return Annotate(ready.status(), absl::StrCat("readiness in ComputeDomain ", DomainRef(domain)));
  }
  if (!*ready) {
    return RetryableError(absl::StrCat(
        "current node not ready in ComputeDomain ", DomainRef(domain), ": the IMEX daemon on node ",
        options_.node_name, " is not Ready yet (clique ", clique.empty() ? "\"\"" : clique, ")"));
  }
  if (clique.empty()) return cdi::ContainerEdits();  // no NVLink fabric: no channel
  return ChannelEdits(options_.imex_channels_major,
                      d.allocation_mode == "All" ? kImexChannelCount : 1);
}

absl::StatusOr<cdi::ContainerEdits> DeviceState::PrepareHostManagedChannel(
    const RecordedDevice& d) {
  if (clique_id().empty()) return cdi::ContainerEdits();  // no NVLink fabric: no channel
  RETURN_IF_ERROR(options_.host_imex->Check());
  if (d.id < 0 || d.id >= kImexChannelCount) {
    return PermanentError(absl::StrCat("channel ID ", d.id, " of device ", d.device,
                                       " is out of range [0, ", kImexChannelCount, ")"));
  }
  cdi::ContainerEdits edits = ChannelEdits(options_.imex_channels_major, d.id + 1);
  edits.device_nodes.erase(edits.device_nodes.begin(), edits.device_nodes.end() - 1);
  return edits;
}

absl::StatusOr<cdi::ContainerEdits> DeviceState::PrepareDaemon(const RecordedDevice& d) {
  std::shared_ptr<const k8s::ComputeDomain> domain = api_->FindDomain(d.domain_id);
  if (domain == nullptr) {
    return RetryableError(absl::StrCat("compute domain not found: ", d.domain_id,
                                       " (not in the plugin's ComputeDomain cache yet)"));
  }
  const std::string dir = DomainDir(d.domain_id);
  RETURN_IF_ERROR(MakeDirectories(dir, 0755));
  RETURN_IF_ERROR(WriteFileAtomically(dir + "/imexd.cfg.tmpl", ImexConfigTemplate(), 0644));
  DaemonEditsInput in{.clique_id = clique_id(),
                      .domain_uid = domain->metadata.uid,
                      .domain_name = domain->metadata.name,
                      .domain_namespace = domain->metadata.namespace_name,
                      .domain_dir = dir};
  for (auto [name, out] : {std::pair{"nvidia-imex", &in.imex_host_path},
                           std::pair{"nvidia-imex-ctl", &in.imex_ctl_host_path}}) {
    absl::StatusOr<std::string> path = options_.root->FindBinary(name);
    if (!path.ok()) {
      return Annotate(path.status(),
                      absl::StrCat(name, " in the driver root ", options_.root->root(),
                                   " (the IMEX daemon needs it; is the driver complete?)"));
    }
    *out = options_.root->ToHostPath(*path);
  }
  if (!in.clique_id.empty()) {
    absl::StatusOr<driverroot::DeviceNodeInfo> cap = ImexManagementCapability(*options_.root);
    if (!cap.ok()) return Annotate(cap.status(), "IMEX management capability (fabric-imex-mgmt)");
    in.imex_mgmt_capability = *cap;
  }
  return DaemonEdits(in);
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
  // Domains whose channel another live claim on this node still records: their label stays
  // (two claims of one domain can meet here after a force-deleted pod).
  std::set<std::string> still_used;
  ASSIGN_OR_RETURN(checkpoint::ClaimMap all, checkpoint_->List());
  for (const auto& [other_uid, other] : all) {
    if (other_uid == uid) continue;
    absl::StatusOr<ClaimRecord> r = DecodeRecord(other);
    if (!r.ok() || r->phase == Phase::kAborted) continue;
    for (const RecordedDevice& d : r->devices) {
      if (d.type == DeviceType::kChannel) still_used.insert(d.domain_id);
    }
  }
  for (const RecordedDevice& d : record.devices) {
    // hostManaged sets no label (a label of another mode's claim is the controller's to clean).
    if (d.type == DeviceType::kChannel && !host_managed() && still_used.count(d.domain_id) == 0) {
      RETURN_IF_ERROR(Annotate(api_->RemoveNodeLabel(d.domain_id),
                               absl::StrCat("claim ", uid, ": remove the node label")));
    }
  }
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
    for (RecordedDevice& d : aborted.devices) d.cdi_device_ids.clear();
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
