#include "lib/gpu/cleanup.h"

#include "absl/strings/str_cat.h"
#include "lib/common/json_access.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::gpu {
namespace {

// metadata.uid of an object the API server sent, checked.
absl::StatusOr<std::string> UidOf(const nlohmann::json& object) {
  ASSIGN_OR_RETURN(const nlohmann::json* meta, json_access::GetObject(object, "", "metadata"));
  return json_access::GetString(*meta, "metadata", "uid");
}

}  // namespace

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
      auto current = api_->Get(claim.namespace_name, claim.name);
      if (absl::IsNotFound(current.status())) {
        stale = true;
      } else if (!current.ok()) {
        note(current.status());
        continue;
      } else {
        absl::StatusOr<std::string> current_uid = UidOf(*current);
        if (!current_uid.ok()) {
          // A malformed answer says nothing about the claim: keep it for the next pass.
          absl::Status s = Annotate(current_uid.status(),
                                    absl::StrCat("cleanup: ResourceClaim ", claim.namespace_name,
                                                 "/", claim.name, " from the API server"));
          DRA_WARNING("skipping a claim whose ResourceClaim does not decode", "claim", uid, "err",
                      s);
          note(std::move(s));
          continue;
        }
        stale = *current_uid != uid;
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
  // Temporary CDI files are left by a crash mid-write. Under the prep lock: a prepare in flight
  // writes its spec through one.
  note(driver_->RunLocked([&]() -> absl::Status {
    ASSIGN_OR_RETURN(int temporary, cdi_->RemoveTemporaryFiles());
    if (temporary > 0)
      DRA_INFO("removed temporary CDI spec files left by a crash", "files", temporary);
    return absl::OkStatus();
  }));
  // CDI specs without a checkpoint entry: rebuilt while their claim is in use here, else removed.
  absl::StatusOr<SpecReconciliation> specs =
      ReconcileCdiSpecs(*api_, *cdi_, *checkpoint_, *state_, *driver_, /*remove_orphans=*/true);
  if (!specs.ok()) {
    note(specs.status());
  } else {
    if (!specs->api_error.ok()) {
      note(Annotate(specs->api_error, "CDI specs without a checkpoint entry kept"));
    } else if (!specs->rebuilt.empty() || !specs->failed.empty()) {
      DRA_WARNING("CDI specs of claims in use on this node had no checkpoint entry", "summary",
                  specs->Summary(/*removed_orphans=*/true));
    }
    if (!specs->rebuilt.empty()) driver_->RefreshPreparedDevicesGauge();
  }
  return first_error;
}

}  // namespace dra::gpu
