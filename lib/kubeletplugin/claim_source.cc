#include "lib/kubeletplugin/claim_source.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/status.h"
#include "lib/common/trace.h"

namespace dra::kubeletplugin {

ClaimGetter ClaimGetterFromClient(k8s::Client* client) {
  return [client](const std::string& ns,
                  const std::string& name) -> absl::StatusOr<k8s::ResourceClaim> {
    ASSIGN_OR_RETURN(nlohmann::json object, client->Get(k8s::ResourceClaim::kResource, ns, name));
    return k8s::ResourceClaim::FromJson(object);
  };
}

absl::StatusOr<std::vector<k8s::ResourceClaim>> FetchClaimsForPrepare(
    const ClaimGetter& getter, const std::vector<ClaimRef>& refs, ClaimLookup* lookup) {
  std::vector<k8s::ResourceClaim> claims;
  claims.reserve(refs.size());
  for (const ClaimRef& ref : refs) {
    if (lookup != nullptr) {
      std::shared_ptr<const k8s::ResourceClaim> cached = lookup->Find(ref);
      // Find promises both; checked again so that a faulty lookup can never skip them.
      if (cached != nullptr && cached->metadata.uid == ref.uid &&
          cached->status.allocation.has_value()) {
        CallTrace::CountInCurrent("claimCacheHits");
        claims.push_back(*cached);
        continue;
      }
      CallTrace::CountInCurrent("claimCacheMisses");
    }
    absl::StatusOr<k8s::ResourceClaim> claim = getter(ref.namespace_name, ref.name);
    if (!claim.ok()) {
      return Annotate(claim.status(), absl::StrCat("retrieve claim ", ref.String()));
    }
    if (!claim->status.allocation.has_value()) {
      return absl::FailedPreconditionError(absl::StrCat("claim ", ref.String(), " not allocated"));
    }
    if (claim->metadata.uid != ref.uid) {
      return absl::FailedPreconditionError(absl::StrCat("claim ", ref.String(), " got replaced"));
    }
    claims.push_back(*std::move(claim));
  }
  return claims;
}

}  // namespace dra::kubeletplugin
