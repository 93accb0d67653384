#include "lib/cdplugin/claim_steps.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/cdplugin/errors.h"
#include "lib/cdplugin/imex_config_template.h"
#include "lib/common/atomic_file.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/prepare/step_table.h"

namespace dra::cdplugin {
namespace {

std::string DomainRef(const k8s::ComputeDomain& cd) {
  return absl::StrCat(cd.metadata.namespace_name, "/", cd.metadata.name, " (", cd.metadata.uid,
                      ")");
}

// Base of the per-device steps: errors name the claim and the device.
class DeviceStep : public prepare::PlanStep {
 public:
  DeviceStep(const StepEnv& env, std::string ref, RecordedDevice device, ClaimContext* context)
      : env_(env), ref_(std::move(ref)), device_(std::move(device)), context_(context) {}
  bool resumable() const override { return true; }
  absl::Status Apply(const Deadline& /*deadline*/) final {
    return Annotate(ApplyDevice(),
                    absl::StrCat("claim ", ref_, ", device ", device_.kubelet.device_name));
  }

 protected:
  virtual absl::Status ApplyDevice() = 0;

  const StepEnv& env_;
  const std::string ref_;
  const RecordedDevice device_;
  ClaimContext* const context_;
};

class NodeLabelStep final : public DeviceStep {
 public:
  using DeviceStep::DeviceStep;
  std::string name() const override { return kNodeLabelStep; }
  nlohmann::json UndoData() const override { return {{"domain", device_.domain_id}}; }
  bool external() const override { return true; }

 private:
  absl::Status ApplyDevice() override { return env_.api->AddNodeLabel(device_.domain_id); }
};

class ChannelStep final : public DeviceStep {
 public:
  ChannelStep(const StepEnv& env, std::string ref, RecordedDevice device, ClaimContext* context,
              std::shared_ptr<const k8s::ComputeDomain> domain)
      : DeviceStep(env, std::move(ref), std::move(device), context), domain_(std::move(domain)) {}
  std::string name() const override { return kChannelStep; }
  nlohmann::json UndoData() const override { return nullptr; }
  bool external() const override { return false; }

 private:
  absl::Status ApplyDevice() override {
    ASSIGN_OR_RETURN(cdi::ContainerEdits edits,
                     env_.host_imex != nullptr ? HostManagedEdits() : DriverManagedEdits());
    context_->edits[device_.kubelet.device_name] = std::move(edits);
    return absl::OkStatus();
  }

  absl::StatusOr<cdi::ContainerEdits> DriverManagedEdits() const {
    const std::string& clique = env_.clique_id;
    absl::StatusOr<bool> ready = env_.api->DaemonReady(*domain_, clique);
    if (!ready.ok()) {
      return Annotate(ready.status(),
                      absl::StrCat("readiness in ComputeDomain ", DomainRef(*domain_)));
    }
    if (!*ready) {
      return RetryableError(absl::StrCat("current node not ready in ComputeDomain ",
                                         DomainRef(*domain_), ": the IMEX daemon on node ",
                                         env_.node_name, " is not Ready yet (clique ",
                                         clique.empty() ? "\"\"" : clique, ")"));
    }
    if (clique.empty()) return cdi::ContainerEdits();  // no NVLink fabric: no channel
    return ChannelEdits(env_.imex_channels_major,
                        device_.allocation_mode == "All" ? kImexChannelCount : 1);
  }

  absl::StatusOr<cdi::ContainerEdits> HostManagedEdits() const {
    if (env_.clique_id.empty()) return cdi::ContainerEdits();  // no NVLink fabric: no channel
    RETURN_IF_ERROR(env_.host_imex->Check());
    if (device_.id < 0 || device_.id >= kImexChannelCount) {
      return PermanentError(absl::StrCat("channel ID ", device_.id, " of device ",
                                         device_.kubelet.device_name, " is out of range [0, ",
                                         kImexChannelCount, ")"));
    }
    cdi::ContainerEdits edits = ChannelEdits(env_.imex_channels_major, device_.id + 1);
    edits.device_nodes.erase(edits.device_nodes.begin(), edits.device_nodes.end() - 1);
    return edits;
  }

  const std::shared_ptr<const k8s::ComputeDomain> domain_;
};

class ImexConfigStep final : public DeviceStep {
 public:
  using DeviceStep::DeviceStep;
  std::string name() const override { return kImexConfigStep; }
  nlohmann::json UndoData() const override { return nullptr; }
  bool external() const override { return false; }

 private:
  absl::Status ApplyDevice() override {
    ASSIGN_OR_RETURN(cdi::ContainerEdits edits, Edits());
    context_->edits[device_.kubelet.device_name] = std::move(edits);
    return absl::OkStatus();
  }

  absl::StatusOr<cdi::ContainerEdits> Edits() const {
    std::shared_ptr<const k8s::ComputeDomain> domain = env_.api->FindDomain(device_.domain_id);
    if (domain == nullptr) {
      return RetryableError(absl::StrCat("compute domain not found: ", device_.domain_id,
                                         " (not in the plugin's ComputeDomain cache yet)"));
    }
    const std::string dir = absl::StrCat(env_.domains_dir, "/", device_.domain_id);
    RETURN_IF_ERROR(MakeDirectories(dir, 0755));
    RETURN_IF_ERROR(WriteFileAtomically(dir + "/imexd.cfg.tmpl", ImexConfigTemplate(), 0644));
    DaemonEditsInput in{.clique_id = env_.clique_id,
                        .domain_uid = domain->metadata.uid,
                        .domain_name = domain->metadata.name,
                        .domain_namespace = domain->metadata.namespace_name,
                        .domain_dir = dir};
    for (auto [name, out] : {std::pair{"nvidia-imex", &in.imex_host_path},
                             std::pair{"nvidia-imex-ctl", &in.imex_ctl_host_path}}) {
      absl::StatusOr<std::string> path = env_.root->FindBinary(name);
      if (!path.ok()) {
        return Annotate(path.status(),
                        absl::StrCat(name, " in the driver root ", env_.root->root(),
                                     " (the IMEX daemon needs it; is the driver complete?)"));
      }
      *out = env_.root->ToHostPath(*path);
    }
    if (!in.clique_id.empty()) {
      absl::StatusOr<driverroot::DeviceNodeInfo> cap = ImexManagementCapability(*env_.root);
      if (!cap.ok()) return Annotate(cap.status(), "IMEX management capability (fabric-imex-mgmt)");
      in.imex_mgmt_capability = *cap;
    }
    return DaemonEdits(in);
  }
};

class CdiSpecStep final : public prepare::PlanStep {
 public:
  CdiSpecStep(const StepEnv& env, std::string uid, ClaimContext* context)
      : env_(env), uid_(std::move(uid)), context_(context) {}
  std::string name() const override { return kCdiSpecStep; }
  nlohmann::json UndoData() const override { return nullptr; }
  bool external() const override { return false; }
  bool resumable() const override { return true; }
  absl::Status Apply(const Deadline& /*deadline*/) override {
    ASSIGN_OR_RETURN(context_->cdi_ids, env_.cdi->WriteClaimSpec(uid_, context_->edits));
    return absl::OkStatus();
  }

 private:
  const StepEnv& env_;
  const std::string uid_;
  ClaimContext* const context_;
};

// Domains whose channel another recorded, not aborted claim on this node has (two claims of one
// domain can meet here after a force-deleted pod).
absl::StatusOr<std::set<std::string>> DomainsStillUsed(const StepEnv& env, const std::string& uid) {
  std::set<std::string> still_used;
  ASSIGN_OR_RETURN(checkpoint::ClaimMap all, env.checkpoint->List());
  for (const auto& [other_uid, other] : all) {
    if (other_uid == uid) continue;
    absl::StatusOr<ClaimRecord> r = DecodeRecord(other);
    if (!r.ok() || r->phase == Phase::kAborted) continue;
    for (const RecordedDevice& d : r->devices) {
      if (d.type == DeviceType::kChannel) still_used.insert(d.domain_id);
    }
  }
  return still_used;
}

absl::Status UndoNodeLabel(const StepEnv& env, const std::string& uid, const nlohmann::json& undo) {
  // hostManaged sets no label (a label of another mode's claim is the controller's to clean).
  if (env.host_imex != nullptr) return absl::OkStatus();
  const auto domain = undo.is_object() ? undo.find("domain") : undo.end();
  if (!undo.is_object() || domain == undo.end() || !domain->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("claim ", uid, ": step ", kNodeLabelStep,
                                                   ": undo data: want {\"domain\": <string>}, got ",
                                                   undo.dump()));
  }
  const std::string domain_id = domain->get<std::string>();
  ASSIGN_OR_RETURN(std::set<std::string> still_used, DomainsStillUsed(env, uid));
  if (still_used.count(domain_id) > 0) return absl::OkStatus();
  return Annotate(env.api->RemoveNodeLabel(domain_id),
                  absl::StrCat("claim ", uid, ": remove the node label"));
}

using Kind = CdStepKind;
using prepare::PlanSteps;
using prepare::StepRecord;

absl::Status UndoNothing(const CdUndoEnv& /*env*/, const StepRecord& /*record*/) {
  return absl::OkStatus();
}

// The kinds of step, in plan order. A plan function appends nothing when the claim does not need
// the kind; every undo must succeed for a step never applied (plan.h).
std::vector<Kind> MakeCdStepTable() {
  std::vector<Kind> table;
  table.push_back(Kind{
      .names = {kNodeLabelStep},
      .doc = {.when = "per channel device, `--imex-mode=driverManaged`",
              .external = true,
              .resumable = true,
              .apply = "set the node label `resource.nvidia.com/computeDomain=<cdUID>` of the "
                       "device's ComputeDomain (`lib/cdplugin/domain_api.h`); retryable while "
                       "the label names another domain, since a node serves one at a time",
              .undo = "remove the label, if it names the recorded domain and no other "
                      "recorded, not aborted claim on the node has a channel of that domain; "
                      "nothing when the plugin runs with `--imex-mode=hostManaged`"},
      .plan =
          [](const ClaimStepsInput& in, const StepEnv& env, ClaimContext& context, PlanSteps& out) {
            if (env.host_imex != nullptr) return absl::OkStatus();
            for (const RecordedDevice& d : in.devices) {
              if (d.type != DeviceType::kChannel) continue;
              out.push_back(std::make_unique<NodeLabelStep>(env, in.ref, d, &context));
            }
            return absl::OkStatus();
          },
      .undo = [](const CdUndoEnv& env,
                 const StepRecord& r) { return UndoNodeLabel(*env.env, env.claim_uid, r.undo); }});
  table.push_back(Kind{
      .names = {kChannelStep},
      .doc = {.when = "per channel device",
              .resumable = true,
              .apply =
                  "a readiness check, then the channel's CDI edits (`lib/cdplugin/cdi_specs.h`); "
                  "changes nothing on the node. driverManaged: this node's IMEX daemon must "
                  "be Ready in the domain's clique (retryable), then the device node "
                  "`/dev/nvidia-caps-imex-channels/channel0` (every channel's with "
                  "allocationMode All). hostManaged: the host's IMEX daemon must answer "
                  "READY (`lib/cdplugin/host_imex.h`; retryable), then the allocated "
                  "channel's device node. A node without a clique ID gets no device node "
                  "(and in hostManaged mode no check)",
              .undo = "nothing"},
      .plan =
          [](const ClaimStepsInput& in, const StepEnv& env, ClaimContext& context, PlanSteps& out) {
            for (const RecordedDevice& d : in.devices) {
              if (d.type != DeviceType::kChannel) continue;
              auto domain = in.channel_domains.find(d.domain_id);
              out.push_back(std::make_unique<ChannelStep>(
                  env, in.ref, d, &context,
                  domain != in.channel_domains.end() ? domain->second : nullptr));
            }
            return absl::OkStatus();
          },
      .undo = UndoNothing});
  table.push_back(Kind{
      .names = {kImexConfigStep},
      .doc = {.when = "per daemon device",
              .resumable = true,
              .apply = "the device's ComputeDomain must be in the plugin's cache (retryable); "
                       "write `<data dir>/domains/<cdUID>/imexd.cfg.tmpl` (directory 0755, file "
                       "0644, atomically; `lib/cdplugin/imex_config_template.h`) and collect the "
                       "daemon's CDI edits (`lib/cdplugin/cdi_specs.h`); the plugin's own files",
              .undo = "nothing: the directory stays, since a new daemon pod of the same domain "
                      "may be starting; the cleanup removes those of domains that are gone"},
      .plan =
          [](const ClaimStepsInput& in, const StepEnv& env, ClaimContext& context, PlanSteps& out) {
            for (const RecordedDevice& d : in.devices) {
              if (d.type == DeviceType::kChannel) continue;
              out.push_back(std::make_unique<ImexConfigStep>(env, in.ref, d, &context));
            }
            return absl::OkStatus();
          },
      .undo = UndoNothing});
  table.push_back(Kind{
      .names = {kCdiSpecStep},
      .doc = {.when = "always",
              .resumable = true,
              .apply = "write the claim's CDI spec "
                       "(`<cdi root>/k8s.compute-domain.nvidia.com-claim_<claim uid>.json`, "
                       "atomically) with one CDI device per device that has edits from the steps "
                       "before, or remove it when none has; the plugin's own file",
              .undo = "nothing here: unprepare removes the spec once the steps' undo "
                      "succeeded, whether or not this step was recorded (a crash during the "
                      "write leaves a spec that no record names), so that an undo that fails "
                      "leaves the prepared claim whole"},
      .plan =
          [](const ClaimStepsInput& in, const StepEnv& env, ClaimContext& context, PlanSteps& out) {
            out.push_back(std::make_unique<CdiSpecStep>(env, in.uid, &context));
            return absl::OkStatus();
          },
      .undo = UndoNothing});
  return table;
}

}  // namespace

const std::vector<CdStepKind>& CdStepTable() {
  static const std::vector<CdStepKind>* const kTable =
      new std::vector<CdStepKind>(MakeCdStepTable());
  return *kTable;
}

absl::Status PlanClaimSteps(const ClaimStepsInput& in, const StepEnv& env, ClaimPlan* plan) {
  return prepare::PlanFromTable(CdStepTable(), in, env, plan->context, plan->steps);
}

prepare::StepUndoers ClaimUndoers(const StepEnv& env, const std::string& uid) {
  return prepare::UndoersFromTable(CdStepTable(), CdUndoEnv{.env = &env, .claim_uid = uid});
}

std::string CdStepTableMarkdown() { return prepare::StepTableMarkdown(CdStepTable()); }

std::vector<RecordedDevice> WithCdiIds(std::vector<RecordedDevice> devices,
                                       const ClaimContext& context) {
  for (RecordedDevice& d : devices) {
    std::vector<std::string>& ids = d.kubelet.cdi_device_ids;
    ids.clear();
    if (d.type == DeviceType::kDaemon) ids.push_back(CdiSpecs::BaseDeviceId());
    if (auto it = context.cdi_ids.find(d.kubelet.device_name); it != context.cdi_ids.end()) {
      ids.push_back(it->second);
    }
  }
  return devices;
}

std::vector<prepare::StepRecord> LegacySteps(const std::vector<RecordedDevice>& devices,
                                             bool completed, bool host_managed) {
  const prepare::StepState state =
      completed ? prepare::StepState::kApplied : prepare::StepState::kBegun;
  std::vector<prepare::StepRecord> out;
  // The plan's order: the table's kinds, each over the devices.
  for (const RecordedDevice& d : devices) {
    if (d.type == DeviceType::kChannel && !host_managed) {
      out.push_back({kNodeLabelStep, state, {{"domain", d.domain_id}}});
    }
  }
  for (const RecordedDevice& d : devices) {
    if (d.type == DeviceType::kChannel) out.push_back({kChannelStep, state, nullptr});
  }
  for (const RecordedDevice& d : devices) {
    if (d.type != DeviceType::kChannel) out.push_back({kImexConfigStep, state, nullptr});
  }
  out.push_back({kCdiSpecStep, state, nullptr});
  return out;
}

std::vector<prepare::StepRecord> RecordedSteps(const checkpoint::PreparedClaim& claim,
                                               const ClaimRecord& record, bool host_managed) {
  if (auto steps = prepare::RecordedStepsOrNone(claim.steps, claim.uid)) return *std::move(steps);
  return LegacySteps(record.devices, record.phase == Phase::kCompleted, host_managed);
}

}  // namespace dra::cdplugin
