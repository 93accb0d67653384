#pragma once

// Where NodePrepareResources reads the ResourceClaims it is asked about, and the checks a claim
// must pass before a driver sees it.

#include <functional>
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

// A ClaimGetter that GETs resource.k8s.io/v1 ResourceClaims through `client`, which must outlive
// it. Configure the client with a short request timeout (a few seconds) and few retries so that a
// slow API server fails the call instead of running past the kubelet's deadline.
ClaimGetter ClaimGetterFromClient(k8s::Client* client);

// Reads every claim in `refs` (in order) and checks it, as the Go kubeletplugin helper does.
// The first failure fails everything:
//   "retrieve claim ns/name: <error>"  the read failed (its code is kept)
//   "claim ns/name not allocated"      status.allocation is unset (FailedPrecondition)
//   "claim ns/name got replaced"       metadata.uid differs from the ref's UID (FailedPrecondition)
absl::StatusOr<std::vector<k8s::ResourceClaim>> FetchClaimsForPrepare(
    const ClaimGetter& getter, const std::vector<ClaimRef>& refs);

}  // namespace dra::kubeletplugin
