#include "lib/gpu/cleanup.h"

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/k8s/objects_resource.h"

namespace dra::gpu {

absl::Status Cleanup::RunOnce() {
  ASSIGN_OR_RETURN(checkpoint::ClaimMap claims, checkpoint_->List());
  absl::Status first_error;
  auto note = [&first_error](absl::Status s) {
    if (!s.ok() && first_error.ok()) first_error = std::move(s);
  };
  for (const auto& [uid, claim] : claims) {
    bool stale = false;
    if (claim.name.empty()) {
      stale = false;  // cannot look it up; leave it to an explicit unprepare
    } else {
      auto current = client_->Get(k8s::ResourceClaim::kResource, claim.namespace_name, claim.name);
      if (absl::IsNotFound(current.status())) {
        stale = true;
      } else if (!current.ok()) {
        note(current.status());
        continue;
      } else {
        stale = (*current)["metadata"].value("uid", "") != uid;
      }
    }
    if (!stale) continue;
    DRA_INFO("unpreparing claim that no longer exists", "claim", uid, "namespace",
             claim.namespace_name, "name", claim.name, "state",
             checkpoint::ClaimStateName(claim.state));
    auto result = driver_->UnprepareResourceClaims(
        {}, {{.namespace_name = claim.namespace_name, .name = claim.name, .uid = uid}});
    if (!result.ok()) {
      note(result.status());
    } else {
      note((*result)[uid]);
    }
  }
  // CDI specs without a checkpoint entry were left by a crash mid-prepare. Under the prep lock:
  // a prepare in flight writes its spec before its checkpoint entry.
  note(driver_->RunLocked([&]() -> absl::Status {
    ASSIGN_OR_RETURN(int temporary, cdi_->RemoveTemporaryFiles());
    if (temporary > 0)
      DRA_INFO("removed temporary CDI spec files left by a crash", "files", temporary);
    ASSIGN_OR_RETURN(std::vector<std::string> spec_uids, cdi_->ListClaimUids());
    ASSIGN_OR_RETURN(checkpoint::ClaimMap current, checkpoint_->List());
    for (const std::string& uid : spec_uids) {
      if (current.contains(uid)) continue;
      DRA_INFO("removing CDI spec of a claim that is not prepared", "claim", uid);
      RETURN_IF_ERROR(cdi_->Remove(uid));
    }
    return absl::OkStatus();
  }));
  return first_error;
}

}  // namespace dra::gpu
