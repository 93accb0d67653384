#include "lib/cddaemon/clique_registrar.h"

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/k8s/errors.h"

namespace dra::cddaemon {
namespace {

using k8s::ComputeDomainClique;

k8s::ListOptions NameSelector(const std::string& name) {
  k8s::ListOptions o;
  o.field_selector = absl::StrCat("metadata.name=", name);
  return o;
}

}  // namespace

CliqueRegistrar::CliqueRegistrar(k8s::Client* client, CliqueRegistrarOptions options,
                                 DaemonsCallback callback)
    : client_(client),
      options_(std::move(options)),
      name_(k8s::CliqueObjectName(options_.compute_domain_uid, options_.me.clique_id)),
      callback_(std::move(callback)),
      informer_(client, options_.namespace_name, NameSelector(name_), options_.resync),
      loop_(absl::StrCat("ComputeDomainClique ", options_.namespace_name, "/", name_),
            options_.backoff, [this](bool reread) { return SyncOnce(reread); }) {
  auto wake = [this](const auto&...) { loop_.Wake(); };
  informer_.AddHandlers({.on_add = wake, .on_update = wake, .on_delete = wake});
}

CliqueRegistrar::~CliqueRegistrar() { (void)Stop(absl::ZeroDuration()); }

void CliqueRegistrar::Start() {
  informer_.Start();
  loop_.Start();
}

void CliqueRegistrar::SetReady(bool ready) {
  {
    absl::MutexLock lock(&mu_);
    if (ready_ == ready) return;
    ready_ = ready;
  }
  loop_.Wake();
}

absl::StatusOr<ComputeDomainClique> CliqueRegistrar::ReadLatest() {
  ASSIGN_OR_RETURN(nlohmann::json j,
                   client_->Get(ComputeDomainClique::kResource, options_.namespace_name, name_));
  return ComputeDomainClique::FromJson(j);
}

absl::Status CliqueRegistrar::SyncOnce(bool reread) {
  std::optional<bool> ready;
  {
    absl::MutexLock lock(&mu_);
    ready = ready_;
  }
  // The informer's copy is good enough unless the last sync failed. After a lost write it is
  // still good once it has moved past the version that lost (the backoff gives the winner's write
  // time to arrive), which saves a GET per conflict; otherwise read the latest.
  std::optional<ComputeDomainClique> clique;
  if (auto cached = informer_.Get(absl::StrCat(options_.namespace_name, "/", name_))) {
    if (!reread || (!lost_rv_.empty() && cached->metadata.resource_version != lost_rv_)) {
      clique = *cached;
    }
  }
  lost_rv_.clear();
  if (!clique) {
    absl::StatusOr<ComputeDomainClique> latest = ReadLatest();
    if (latest.ok()) {
      clique = std::move(*latest);
    } else if (!absl::IsNotFound(latest.status())) {
      return latest.status();
    }
  }
  bool create = !clique;
  if (create) clique = NewClique(options_.namespace_name, options_.compute_domain_uid, options_.me);

  auto label = clique->metadata.labels.find(std::string(k8s::kComputeDomainLabel));
  if (label == clique->metadata.labels.end() || label->second != options_.compute_domain_uid) {
    return absl::FailedPreconditionError(
        absl::StrCat("ComputeDomainClique ", options_.namespace_name, "/", name_, ": label ",
                     k8s::kComputeDomainLabel, " is \"",
                     label == clique->metadata.labels.end() ? "" : label->second, "\", expected \"",
                     options_.compute_domain_uid, "\""));
  }
  ASSIGN_OR_RETURN(bool changed, UpsertOwnEntry(*clique, options_.me));
  if (ready.has_value()) {
    ASSIGN_OR_RETURN(bool status_changed, SetOwnStatus(*clique, options_.me.node_name,
                                                       *ready ? k8s::kComputeDomainStatusReady
                                                              : k8s::kComputeDomainStatusNotReady));
    changed = changed || status_changed;
  }
  if (create) {
    ASSIGN_OR_RETURN(
        nlohmann::json out,
        client_->Create(ComputeDomainClique::kResource, options_.namespace_name, clique->ToJson()));
    ASSIGN_OR_RETURN(clique, ComputeDomainClique::FromJson(out));
    DRA_INFO("created ComputeDomainClique", "clique", name_, "index",
             clique->daemons.empty() ? -1 : clique->daemons.back().index);
  } else if (changed) {
    absl::StatusOr<nlohmann::json> out =
        client_->Update(ComputeDomainClique::kResource, options_.namespace_name, clique->ToJson());
    if (k8s::IsConflict(out.status())) lost_rv_ = clique->metadata.resource_version;
    if (!out.ok()) return out.status();
    ASSIGN_OR_RETURN(clique, ComputeDomainClique::FromJson(*out));
    DRA_VLOG(2, "updated own entry in ComputeDomainClique", "clique", name_);
  }
  return callback_(clique->daemons);
}

absl::Status CliqueRegistrar::Stop(absl::Duration budget) {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return absl::OkStatus();
    stopped_ = true;
  }
  loop_.Stop();
  // The informer stops after the removal: its watch notices a stop only at its next poll, and
  // deregistration should not wait for that.
  absl::Status removed = budget > absl::ZeroDuration() ? RemoveOwnEntry(budget) : absl::OkStatus();
  informer_.Stop();
  return removed;
}

absl::Status CliqueRegistrar::RemoveOwnEntry(absl::Duration budget) {
  absl::Time deadline = absl::Now() + budget;
  Backoff backoff(options_.backoff);
  absl::Status last;
  while (absl::Now() < deadline) {
    absl::StatusOr<ComputeDomainClique> clique = ReadLatest();
    if (absl::IsNotFound(clique.status())) return absl::OkStatus();
    if (clique.ok()) {
      if (!RemoveOwnEntries(*clique, options_.me.pod_ip)) return absl::OkStatus();
      absl::StatusOr<nlohmann::json> out = client_->Update(
          ComputeDomainClique::kResource, options_.namespace_name, clique->ToJson());
      if (out.ok()) {
        DRA_INFO("removed own entry from ComputeDomainClique", "clique", name_, "ip",
                 options_.me.pod_ip);
        return absl::OkStatus();
      }
      last = out.status();
    } else {
      last = clique.status();
    }
    absl::SleepFor(std::min(backoff.Next(), deadline - absl::Now()));
  }
  return absl::DeadlineExceededError(absl::StrCat("remove own entry from ComputeDomainClique ",
                                                  name_, " within ", absl::FormatDuration(budget),
                                                  ": ", last.message()));
}

}  // namespace dra::cddaemon
