#include "lib/gpuplugin/prepare/cleanup.h"

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
    // The public driver's words (docs/compatibility.md "Log lines"): "Checkpointed RC cleanup:".
    const std::string ref = absl::StrCat(claim.namespace_name, "/", claim.name, ":", uid);
    bool stale = false;
    const char* reason = "";
    if (claim.name.empty()) {
      DRA_VLOG(4, "Checkpointed RC cleanup: skip checkpointed claim: RC name not in checkpoint",
               "uid", uid);
      stale = false;  // cannot look it up; leave it to an explicit unprepare
    } else {
      auto current = api_->Get(claim.namespace_name, claim.name);
      if (absl::IsNotFound(current.status())) {
        stale = true;
        reason = "not found in API server";
      } else if (!current.ok()) {
        DRA_INFO(
            "Checkpointed RC cleanup: skip for checkpointed claim: lookup failed (retry later)",
            "claim", ref, "err", current.status());
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
        reason = "UID changed";
      }
    }
    if (!stale) {
      DRA_VLOG(4, "Checkpointed RC cleanup: claim not stale", "claim", ref);
      continue;
    }
    DRA_VLOG(4, "Checkpointed RC cleanup: claim is stale", "claim", ref, "reason", reason, "state",
             checkpoint::ClaimStateName(claim.state));
    auto result = driver_->UnprepareResourceClaims(
        {}, {{.namespace_name = claim.namespace_name, .name = claim.name, .uid = uid}});
    absl::Status unprepared = result.ok() ? (*result)[uid] : result.status();
    if (!unprepared.ok()) {
      DRA_WARNING("Checkpointed RC cleanup: error during unprepare (retried later)", "claim", ref,
                  "err", unprepared);
      note(std::move(unprepared));
      continue;
    }
    DRA_INFO("Checkpointed RC cleanup: unprepared stale claim", "claim", ref);
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
