#pragma once

// Where NodePrepareResources reads the ResourceClaims it is asked about, and the checks a claim
// must pass before a driver sees it.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/k8s/client.h"
#include "lib/k8s/objects_resource.h"
#include "lib/kubeletplugin/driver.h"

namespace dra::kubeletplugin {

// Reads one ResourceClaim. Must be safe to call concurrently from several threads, and should
// return within a few seconds: its time counts against the kubelet's 45 s call timeout.
using ClaimGetter = std::function<absl::StatusOr<k8s::ResourceClaim>(const std::string& ns,
                                                                     const std::string& name)>;

// A local copy of claims, asked before the ClaimGetter (claim_cache.h). Thread-safe.
class ClaimLookup {
 public:
  virtual ~ClaimLookup() = default;
  // The claim `ref` names, when the local copy is known to be exact: the same UID as `ref` and an
  // allocation. Null otherwise (not known, another UID, not allocated, or not trusted since an
  // unprepare): the caller reads it with the ClaimGetter.
  virtual std::shared_ptr<const k8s::ResourceClaim> Find(const ClaimRef& ref) = 0;
  // `ref` was unprepared: its copy must not answer a prepare again until a newer version of the
  // claim arrived (a later allocation of the same claim must not be answered from an older one).
  virtual void Unprepared(const ClaimRef& ref) = 0;
};

// A ClaimGetter that GETs resource.k8s.io/v1 ResourceClaims through `client`, which must outlive
// it. Configure the client with a short request timeout (a few seconds) and few retries so that a
// slow API server fails the call instead of running past the kubelet's deadline.
ClaimGetter ClaimGetterFromClient(k8s::Client* client);

// Reads every claim in `refs` (in order) and checks it, as the Go kubeletplugin helper does.
// With a `lookup`, a claim it answers is taken from it (counted "claimCacheHits" in the call's
// trace, lib/common/trace.h) and only the others are read with `getter` ("claimCacheMisses").
// The first failure fails everything:
//   "retrieve claim ns/name: <error>"  the read failed (its code is kept)
//   "claim ns/name not allocated"      status.allocation is unset (FailedPrecondition)
//   "claim ns/name got replaced"       metadata.uid differs from the ref's UID (FailedPrecondition)
absl::StatusOr<std::vector<k8s::ResourceClaim>> FetchClaimsForPrepare(
    const ClaimGetter& getter, const std::vector<ClaimRef>& refs, ClaimLookup* lookup = nullptr);

}  // namespace dra::kubeletplugin
