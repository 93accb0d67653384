#include "lib/cddaemon/clique_registrar.h"

#include "absl/strings/numbers.h"
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

// Whether `a` is a later version of the same object than `b` (resourceVersions of one object
// from etcd increase; anything unparsable counts as not newer, so the informer's copy is used).
bool NewerVersion(const k8s::ObjectMeta& a, const k8s::ObjectMeta& b) {
  uint64_t va = 0, vb = 0;
  return a.uid == b.uid && absl::SimpleAtoi(a.resource_version, &va) &&
         absl::SimpleAtoi(b.resource_version, &vb) && va > vb;
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

absl::StatusOr<std::optional<ComputeDomainClique>> CliqueRegistrar::View(bool reread) {
  // The informer's copy is good enough: the patches carry no resourceVersion, and their "test"
  // operations refuse what a stale copy would get wrong. After a failure, or before the informer
  // synced (when "not cached" does not mean "missing"), read the latest.
  if (!reread && informer_.HasSynced()) {
    auto cached = informer_.Get(absl::StrCat(options_.namespace_name, "/", name_));
    if (!cached) return std::nullopt;
    // Our own last write may not have reached the informer yet: a view without it would append
    // the entry a second time (refused by the API server as a duplicate key, a lost write).
    if (last_answer_ && NewerVersion(last_answer_->metadata, cached->metadata)) return last_answer_;
    return std::optional<ComputeDomainClique>(*cached);
  }
  absl::StatusOr<ComputeDomainClique> latest = ReadLatest();
  if (latest.ok()) return std::optional<ComputeDomainClique>(std::move(*latest));
  if (absl::IsNotFound(latest.status())) return std::nullopt;
  return latest.status();
}

absl::Status CliqueRegistrar::SyncOnce(bool reread) {
  OwnEntryWish wish{.preferred_index = settled_index_};
  {
    absl::MutexLock lock(&mu_);
    if (ready_.has_value()) {
      wish.status =
          std::string(*ready_ ? k8s::kComputeDomainStatusReady : k8s::kComputeDomainStatusNotReady);
    }
  }
  ASSIGN_OR_RETURN(std::optional<ComputeDomainClique> clique, View(reread));
  if (!clique) {
    // Create it holding only this daemon's entry: a plain create is one write without merging of
    // managed fields. When another daemon created it meanwhile (AlreadyExists), read it and append
    // below; the entries others created it with stay.
    absl::StatusOr<nlohmann::json> made =
        client_->Create(ComputeDomainClique::kResource, options_.namespace_name,
                        NewCliqueWithOwnEntry(options_.namespace_name, options_.compute_domain_uid,
                                              options_.me, wish));
    if (made.ok()) {
      ASSIGN_OR_RETURN(clique, ComputeDomainClique::FromJson(*made));
      DRA_INFO("created ComputeDomainClique with own entry", "clique", name_);
    } else if (absl::IsAlreadyExists(made.status())) {
      ASSIGN_OR_RETURN(clique, ReadLatest());
    } else {
      return made.status();
    }
  }
  auto label = clique->metadata.labels.find(std::string(k8s::kComputeDomainLabel));
  if (label == clique->metadata.labels.end() || label->second != options_.compute_domain_uid) {
    return absl::FailedPreconditionError(
        absl::StrCat("ComputeDomainClique ", options_.namespace_name, "/", name_, ": label ",
                     k8s::kComputeDomainLabel, " is \"",
                     label == clique->metadata.labels.end() ? "" : label->second, "\", expected \"",
                     options_.compute_domain_uid, "\""));
  }
  // Each answer is the object as the server holds it after the write, so a second pass moves an
  // entry that appended an index another daemon appended first (k8s::ResolvedIndices).
  for (int pass = 0; pass < kPatchPasses; ++pass) {
    ASSIGN_OR_RETURN(nlohmann::json ops, OwnEntryPatch(*clique, options_.me, wish));
    if (ops.empty()) break;
    ASSIGN_OR_RETURN(nlohmann::json out, client_->JsonPatch(ComputeDomainClique::kResource,
                                                            options_.namespace_name, name_, ops));
    ASSIGN_OR_RETURN(clique, ComputeDomainClique::FromJson(out));
    DRA_VLOG(2, "patched own entry in ComputeDomainClique", "clique", name_, "ops", ops.size());
  }
  last_answer_ = clique;
  std::vector<k8s::ComputeDomainDaemonInfo> settled = k8s::SettledDaemons(clique->daemons);
  bool mine = false;
  for (const k8s::ComputeDomainDaemonInfo& d : settled) {
    if (d.node_name == options_.me.node_name) {
      mine = true;
      settled_index_ = d.index;
    }
  }
  RETURN_IF_ERROR(callback_(settled));
  if (!mine) {
    return absl::UnavailableError(absl::StrCat("own entry in ComputeDomainClique ", name_,
                                               " does not hold its resolved index yet"));
  }
  return absl::OkStatus();
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
      nlohmann::json ops = RemoveOwnEntriesPatch(*clique, options_.me.pod_ip);
      if (ops.empty()) return absl::OkStatus();
      absl::StatusOr<nlohmann::json> out =
          client_->JsonPatch(ComputeDomainClique::kResource, options_.namespace_name, name_, ops);
      if (out.ok() || absl::IsNotFound(out.status())) {
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
