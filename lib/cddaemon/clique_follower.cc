#include "lib/cddaemon/clique_follower.h"

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::cddaemon {
namespace {

// How long the worker waits for the informer's first list before it counts as a failed sync.
constexpr absl::Duration kSyncWait = absl::Seconds(30);

}  // namespace

CliqueFollower::CliqueFollower(k8s::Client* client, CliqueFollowerOptions options,
                               DaemonsCallback callback)
    : options_(std::move(options)),
      name_(k8s::CliqueObjectName(options_.compute_domain_uid, options_.clique_id)),
      callback_(std::move(callback)),
      informer_(client, options_.namespace_name,
                k8s::ListOptions{.field_selector = absl::StrCat("metadata.name=", name_)},
                options_.resync),
      loop_(absl::StrCat("ComputeDomainClique ", options_.namespace_name, "/", name_),
            options_.backoff, [this](bool reread) { return SyncOnce(reread); }) {
  auto wake = [this](const auto&...) { loop_.Wake(); };
  informer_.AddHandlers({.on_add = wake, .on_update = wake, .on_delete = wake});
}

CliqueFollower::~CliqueFollower() { (void)Stop(absl::ZeroDuration()); }

void CliqueFollower::Start() {
  informer_.Start();
  loop_.Start();
}

absl::Status CliqueFollower::SyncOnce(bool /*reread*/) {
  // The informer's copy is the clique: only the controller writes it, and every change reaches
  // the watch. Before the first list "not cached" does not mean "missing".
  if (!informer_.WaitForSync(kSyncWait)) {
    return absl::UnavailableError(absl::StrCat("ComputeDomainClique ", options_.namespace_name, "/",
                                               name_, ": watch not synced within ",
                                               absl::FormatDuration(kSyncWait)));
  }
  auto clique = informer_.Get(absl::StrCat(options_.namespace_name, "/", name_));
  if (!clique) return absl::OkStatus();  // not created yet, or deleted: the next event wakes us
  auto label = clique->metadata.labels.find(std::string(k8s::kComputeDomainLabel));
  if (label == clique->metadata.labels.end() || label->second != options_.compute_domain_uid) {
    return absl::FailedPreconditionError(
        absl::StrCat("ComputeDomainClique ", options_.namespace_name, "/", name_, ": label ",
                     k8s::kComputeDomainLabel, " is \"",
                     label == clique->metadata.labels.end() ? "" : label->second, "\", expected \"",
                     options_.compute_domain_uid, "\""));
  }
  std::vector<k8s::ComputeDomainDaemonInfo> settled = k8s::SettledDaemons(clique->daemons);
  bool mine = false;
  for (const k8s::ComputeDomainDaemonInfo& d : settled) mine |= d.node_name == options_.node_name;
  if (!mine) {
    DRA_VLOG(2, "own node not listed in ComputeDomainClique yet", "clique", name_);
    return absl::OkStatus();
  }
  if (last_ && *last_ == settled) return absl::OkStatus();
  RETURN_IF_ERROR(callback_(settled));
  last_ = std::move(settled);
  return absl::OkStatus();
}

absl::Status CliqueFollower::Stop(absl::Duration /*budget*/) {
  if (stopped_) return absl::OkStatus();
  stopped_ = true;
  loop_.Stop();
  informer_.Stop();
  return absl::OkStatus();
}

}  // namespace dra::cddaemon
