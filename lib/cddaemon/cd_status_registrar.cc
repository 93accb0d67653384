#include "lib/cddaemon/cd_status_registrar.h"

#include "absl/strings/str_cat.h"
#include "lib/cddaemon/cd_status_entry.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::cddaemon {
namespace {

using k8s::ComputeDomain;

k8s::ListOptions NameSelector(const std::string& name) {
  k8s::ListOptions o;
  o.field_selector = absl::StrCat("metadata.name=", name);
  return o;
}

}  // namespace

CdStatusRegistrar::CdStatusRegistrar(k8s::Client* client, CdStatusRegistrarOptions options,
                                     DaemonsCallback callback)
    : client_(client),
      options_(std::move(options)),
      what_(absl::StrCat("ComputeDomain ", options_.cd_namespace, "/", options_.cd_name)),
      callback_(std::move(callback)),
      informer_(client, options_.cd_namespace, NameSelector(options_.cd_name), options_.resync),
      loop_(what_, options_.backoff, [this](bool reread) { return SyncOnce(reread); }) {
  auto wake = [this](const auto&...) { loop_.Wake(); };
  informer_.AddHandlers({.on_add = wake, .on_update = wake, .on_delete = wake});
}

CdStatusRegistrar::~CdStatusRegistrar() { (void)Stop(absl::ZeroDuration()); }

void CdStatusRegistrar::Start() {
  informer_.Start();
  loop_.Start();
}

void CdStatusRegistrar::SetReady(bool ready) {
  {
    absl::MutexLock lock(&mu_);
    if (ready_ == ready) return;
    ready_ = ready;
  }
  loop_.Wake();
}

absl::StatusOr<ComputeDomain> CdStatusRegistrar::ReadLatest() {
  ASSIGN_OR_RETURN(nlohmann::json j,
                   client_->Get(ComputeDomain::kResource, options_.cd_namespace, options_.cd_name));
  return ComputeDomain::FromJson(j);
}

absl::Status CdStatusRegistrar::CheckUid(const ComputeDomain& cd) const {
  if (cd.metadata.uid == options_.cd_uid) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(what_, " has UID ", cd.metadata.uid,
                                                    ", expected ", options_.cd_uid,
                                                    " (COMPUTE_DOMAIN_UUID)"));
}

absl::Status CdStatusRegistrar::SyncOnce(bool reread) {
  std::optional<bool> ready;
  {
    absl::MutexLock lock(&mu_);
    ready = ready_;
  }
  std::optional<ComputeDomain> cd;
  if (!reread) {
    if (auto cached = informer_.Get(absl::StrCat(options_.cd_namespace, "/", options_.cd_name))) {
      cd = *cached;
    }
  }
  if (!cd) {
    ASSIGN_OR_RETURN(cd, ReadLatest());
  }
  RETURN_IF_ERROR(CheckUid(*cd));
  ASSIGN_OR_RETURN(bool changed, UpsertOwnNode(*cd, options_.me));
  if (ready.has_value()) {
    ASSIGN_OR_RETURN(bool status_changed,
                     SetOwnNodeStatus(*cd, options_.me.node_name,
                                      *ready ? k8s::kComputeDomainStatusReady
                                             : k8s::kComputeDomainStatusNotReady));
    changed = changed || status_changed;
  }
  if (changed) {
    ASSIGN_OR_RETURN(
        nlohmann::json out,
        client_->UpdateStatus(ComputeDomain::kResource, options_.cd_namespace, cd->ToJson()));
    ASSIGN_OR_RETURN(cd, ComputeDomain::FromJson(out));
    DRA_VLOG(2, "updated own node in ComputeDomain status", "cd", what_);
  }
  if (!options_.dns_names && static_cast<int64_t>(cd->status.nodes.size()) != cd->spec.num_nodes) {
    DRA_INFO("waiting for all nodes before starting IMEX", "numNodes", cd->spec.num_nodes,
             "nodesSeen", cd->status.nodes.size());
    return absl::OkStatus();
  }
  return callback_(SameCliqueDaemons(cd->status.nodes, options_.me.clique_id));
}

absl::Status CdStatusRegistrar::Stop(absl::Duration budget) {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return absl::OkStatus();
    stopped_ = true;
  }
  loop_.Stop();
  absl::Status removed = budget > absl::ZeroDuration() ? RemoveOwnEntry(budget) : absl::OkStatus();
  informer_.Stop();
  return removed;
}

absl::Status CdStatusRegistrar::RemoveOwnEntry(absl::Duration budget) {
  absl::Time deadline = absl::Now() + budget;
  Backoff backoff(options_.backoff);
  absl::Status last;
  while (absl::Now() < deadline) {
    absl::StatusOr<ComputeDomain> cd = ReadLatest();
    if (absl::IsNotFound(cd.status())) return absl::OkStatus();
    if (cd.ok()) {
      if (!RemoveOwnNodes(*cd, options_.me.pod_ip)) return absl::OkStatus();
      absl::StatusOr<nlohmann::json> out =
          client_->UpdateStatus(ComputeDomain::kResource, options_.cd_namespace, cd->ToJson());
      if (out.ok()) {
        // The public driver's line, which its e2e tests grep for (docs/compatibility.md "Log
        // lines").
        DRA_INFO(absl::StrCat("Successfully removed node with IP ", options_.me.pod_ip, " from ",
                              what_));
        return absl::OkStatus();
      }
      last = out.status();
    } else {
      last = cd.status();
    }
    absl::SleepFor(std::min(backoff.Next(), deadline - absl::Now()));
  }
  return absl::DeadlineExceededError(absl::StrCat("remove own node from ", what_, " within ",
                                                  absl::FormatDuration(budget), ": ",
                                                  last.message()));
}

}  // namespace dra::cddaemon
