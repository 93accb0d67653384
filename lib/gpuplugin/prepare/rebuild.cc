#include "lib/gpuplugin/prepare/rebuild.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/json_access.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::gpu {
namespace {

class ClientClaimApi final : public ClaimApi {
 public:
  ClientClaimApi(k8s::Client* client, std::string driver, std::string pool)
      : client_(client), driver_(std::move(driver)), pool_(std::move(pool)) {}

  absl::StatusOr<nlohmann::json> Get(const std::string& ns, const std::string& name) override {
    return client_->Get(k8s::ResourceClaim::kResource, ns, name);
  }

  absl::StatusOr<std::vector<k8s::ResourceClaim>> ListInUseOnNode() override {
    absl::StatusOr<nlohmann::json> list = client_->ListAll(k8s::ResourceClaim::kResource, "");
    if (!list.ok()) return Annotate(list.status(), "list ResourceClaims");
    std::vector<k8s::ResourceClaim> out;
    // ListAll returns a checked list (wire_decode.h): items is an array of objects.
    for (const nlohmann::json& item : json_access::ArrayOrEmpty(*list, "items")) {
      absl::StatusOr<k8s::ResourceClaim> claim = k8s::ResourceClaim::FromJson(item);
      if (!claim.ok()) {
        DRA_WARNING("skipping a ResourceClaim that does not decode", "namespace",
                    json_access::StringOr(json_access::MemberOrNull(item, "metadata"), "namespace"),
                    "name",
                    json_access::StringOr(json_access::MemberOrNull(item, "metadata"), "name"),
                    "err", claim.status());
        continue;
      }
      if (!claim->status.allocation || claim->status.reserved_for.empty()) continue;
      bool here = false;
      for (const k8s::DeviceRequestAllocationResult& r :
           claim->status.allocation->devices.results) {
        here = here || (r.driver == driver_ && r.pool == pool_);
      }
      if (here) out.push_back(*std::move(claim));
    }
    return out;
  }

 private:
  k8s::Client* const client_;
  const std::string driver_;
  const std::string pool_;
};

// Spec UIDs that have no checkpoint entry.
absl::StatusOr<std::vector<std::string>> SpecsWithoutRecord(const ClaimCdi& cdi,
                                                            checkpoint::Checkpoint& checkpoint) {
  ASSIGN_OR_RETURN(std::vector<std::string> spec_uids, cdi.ListClaimUids());
  ASSIGN_OR_RETURN(checkpoint::ClaimMap claims, checkpoint.List());
  std::set<std::string> seen;  // a claim may have a .json and a .yaml spec
  std::vector<std::string> out;
  for (const std::string& uid : spec_uids) {
    if (!claims.contains(uid) && seen.insert(uid).second) out.push_back(uid);
  }
  return out;
}

std::string Plural(size_t n, absl::string_view one, absl::string_view many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

}  // namespace

std::unique_ptr<ClaimApi> ClaimApiFromClient(k8s::Client* client, std::string driver,
                                             std::string pool) {
  return std::make_unique<ClientClaimApi>(client, std::move(driver), std::move(pool));
}

std::string SpecReconciliation::Summary(bool removed_orphans) const {
  if (!api_error.ok()) {
    return absl::StrCat("could not ask the API server which claims are in use here (",
                        api_error.message(), "): rebuilt nothing and kept all ",
                        Plural(specs_without_record, "CDI spec", "CDI specs"),
                        " without a record; the cleanup tries again");
  }
  std::string out =
      absl::StrCat("rebuilt ", Plural(rebuilt.size(), "prepared claim", "prepared claims"),
                   " from CDI specs and the API server");
  if (!failed.empty()) {
    absl::StrAppend(&out, "; ", Plural(failed.size(), "claim", "claims"),
                    " in use could not be rebuilt (CDI spec kept, see the log)");
  }
  if (removed_orphans) {
    absl::StrAppend(&out, "; removed ", Plural(removed.size(), "CDI spec", "CDI specs"),
                    " without a claim in use on this node");
  } else {
    absl::StrAppend(&out, "; ", Plural(orphans.size(), "CDI spec", "CDI specs"),
                    " without a claim in use on this node left for the cleanup");
  }
  return out;
}

absl::StatusOr<SpecReconciliation> ReconcileCdiSpecs(ClaimApi& api, const ClaimCdi& cdi,
                                                     checkpoint::Checkpoint& checkpoint,
                                                     DeviceState& state, GpuDriver& driver,
                                                     bool remove_orphans) {
  SpecReconciliation result;
  ASSIGN_OR_RETURN(std::vector<std::string> candidates, SpecsWithoutRecord(cdi, checkpoint));
  if (candidates.empty()) return result;
  // Asked outside the prep lock: a slow API server must not hold up prepares.
  std::map<std::string, k8s::ResourceClaim> in_use;
  absl::StatusOr<std::vector<k8s::ResourceClaim>> listed = api.ListInUseOnNode();
  if (!listed.ok()) {
    result.api_error = listed.status();
    result.specs_without_record = candidates.size();
    return result;
  }
  for (k8s::ResourceClaim& c : *listed) in_use.emplace(c.metadata.uid, std::move(c));

  RETURN_IF_ERROR(driver.RunLocked([&]() -> absl::Status {
    // Again under the lock: a prepare may have recorded (or an unprepare removed) one meanwhile.
    ASSIGN_OR_RETURN(std::vector<std::string> uids, SpecsWithoutRecord(cdi, checkpoint));
    result.specs_without_record = uids.size();
    for (const std::string& uid : uids) {
      auto claim = in_use.find(uid);
      if (claim == in_use.end()) {
        result.orphans.push_back(uid);
        if (!remove_orphans) continue;
        DRA_INFO("removing CDI spec of a claim that is neither prepared nor in use on this node",
                 "claim", uid);
        RETURN_IF_ERROR(cdi.Remove(uid));
        result.removed.push_back(uid);
        continue;
      }
      absl::StatusOr<bool> added = state.Rebuild(claim->second);
      if (!added.ok()) {
        DRA_WARNING(
            "claim in use on this node lost its record and cannot be rebuilt; keeping its "
            "CDI spec",
            "claim", uid, "err", added.status());
        result.failed.push_back(uid);
      } else if (*added) {
        result.rebuilt.push_back(uid);
      }
    }
    return absl::OkStatus();
  }));
  return result;
}

std::function<absl::Status(const checkpoint::ClaimMap&)> RemoveClaimSpecsOnReboot(
    std::string cdi_root) {
  return [cdi_root = std::move(cdi_root)](const checkpoint::ClaimMap& dropped) -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<cdi::TransientSpecDir> dir,
                     cdi::TransientSpecDir::Create(cdi_root, kCdiKind));
    ASSIGN_OR_RETURN(std::vector<cdi::TransientSpecFile> files, dir->List());
    std::set<std::string> removed;  // a claim may have a .json and a .yaml spec
    for (const cdi::TransientSpecFile& f : files) {
      if (!removed.insert(f.id).second) continue;
      RETURN_IF_ERROR(
          Annotate(dir->Remove(f.id), "remove the CDI specs written before the node rebooted"));
    }
    DRA_INFO("removed the CDI specs written before the node rebooted", "dir", cdi_root, "specs",
             removed.size(), "droppedClaims", dropped.size());
    return absl::OkStatus();
  };
}

}  // namespace dra::gpu
