#include "lib/cdplugin/cleanup.h"

#include <filesystem>
#include <set>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "lib/cdplugin/prepared_claim.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::cdplugin {

Cleanup::Cleanup(DeviceState* state, checkpoint::Checkpoint* checkpoint, DomainApi* api,
                 Clock* clock, absl::Duration aborted_ttl)
    : state_(state),
      checkpoint_(checkpoint),
      api_(api),
      clock_(clock != nullptr ? clock : RealClock::Get()),
      aborted_ttl_(aborted_ttl) {}

absl::Status Cleanup::RunCheckpointPass() {
  ASSIGN_OR_RETURN(checkpoint::ClaimMap claims, checkpoint_->List());
  absl::Status first_error;
  for (const auto& [uid, c] : claims) {
    absl::StatusOr<ClaimRecord> r = DecodeRecord(c);
    if (!r.ok() || r->phase != Phase::kStarted || c.name.empty()) continue;
    // The public driver's words (docs/compatibility.md "Log lines"): "Checkpointed RC cleanup:".
    const std::string ref = absl::StrCat(c.namespace_name, "/", c.name, ":", uid);
    absl::StatusOr<std::optional<std::string>> current = api_->ClaimUid(c.namespace_name, c.name);
    if (!current.ok()) {
      DRA_INFO("Checkpointed RC cleanup: skip for checkpointed claim: lookup failed (retry later)",
               "claim", ref, "err", current.status());
      if (first_error.ok()) first_error = current.status();
      continue;
    }
    if (current->has_value() && **current == uid) {
      DRA_VLOG(4, "Checkpointed RC cleanup: partially prepared claim not stale", "claim", ref);
      continue;
    }
    DRA_VLOG(4, "Checkpointed RC cleanup: partially prepared claim is stale", "claim", ref,
             "reason", current->has_value() ? "UID changed" : "not found in API server");
    if (absl::Status s = state_->Unprepare(uid); !s.ok()) {
      DRA_WARNING("Checkpointed RC cleanup: error during unprepare (retried later)", "claim", ref,
                  "err", s);
      if (first_error.ok()) first_error = s;
      continue;
    }
    DRA_INFO("Checkpointed RC cleanup: unprepared stale claim", "claim", ref);
  }
  const absl::Time now = clock_->Now();
  RETURN_IF_ERROR(checkpoint_->Update([&](checkpoint::ClaimMap& m) -> absl::Status {
    for (auto it = m.begin(); it != m.end();) {
      absl::StatusOr<ClaimRecord> r = DecodeRecord(it->second);
      if (r.ok() && r->phase == Phase::kAborted && now - r->aborted_at >= aborted_ttl_) {
        DRA_VLOG(1, "dropping expired PrepareAborted entry", "uid", it->first);
        it = m.erase(it);
      } else {
        ++it;
      }
    }
    return absl::OkStatus();
  }));
  return first_error;
}

absl::Status Cleanup::RemoveStaleDomainDirs() {
  namespace fs = std::filesystem;
  std::set<std::string> recorded;
  ASSIGN_OR_RETURN(checkpoint::ClaimMap claims, checkpoint_->List());
  for (const auto& [uid, c] : claims) {
    absl::StatusOr<ClaimRecord> r = DecodeRecord(c);
    if (!r.ok()) continue;
    for (const RecordedDevice& d : r->devices) recorded.insert(d.domain_id);
  }
  std::error_code ec;
  fs::directory_iterator it(state_->DomainsDir(), ec);
  if (ec == std::errc::no_such_file_or_directory) return absl::OkStatus();
  if (ec)
    return absl::InternalError(absl::StrCat("list ", state_->DomainsDir(), ": ", ec.message()));
  for (const fs::directory_entry& e : it) {
    const std::string uid = e.path().filename().string();
    if (!e.is_directory(ec) || recorded.count(uid) > 0 || api_->FindDomain(uid) != nullptr) {
      continue;
    }
    DRA_INFO("removing the directory of a ComputeDomain that is gone", "path", e.path().string());
    fs::remove_all(e.path(), ec);
    if (ec)
      DRA_WARNING("removing a stale domain directory failed", "path", e.path().string(), "err",
                  ec.message());
  }
  return absl::OkStatus();
}

}  // namespace dra::cdplugin
