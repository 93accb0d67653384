#pragma once

// Rebuilding lost checkpoint records from what survives them: the claims' CDI spec files on disk
// and the ResourceClaims the API server says are in use on this node. A corrupt checkpoint is
// replaced by an empty one (lib/checkpoint/checkpoint.h); without this, the cleanup would then
// delete the CDI specs of pods that are still running (their next container restart fails), and
// their unprepare would not undo their time-slice or MPS daemon.
//
// The rule, for each CDI spec file of this driver whose claim UID has no checkpoint entry:
//   - the API server lists a ResourceClaim with that UID, allocated a device of this driver from
//     this node's pool, and reserved for at least one consumer: its record is rebuilt
//     (DeviceState::Rebuild) and the spec is kept;
//   - otherwise the spec is an orphan (a crash mid-prepare, or a claim whose pods are gone);
//   - when the API server cannot be asked, nothing is rebuilt and every spec is kept: a spec is
//     never removed while its claim may still be allocated here.
//
// A reboot is the exception: a spec written before it describes state the reboot took away
// (time-slices, MPS daemons, MIG devices, VFIO bindings), so nothing may be rebuilt from it: the
// record would make the kubelet's prepare after the reboot return at once, applying nothing.
// RemoveClaimSpecsOnReboot removes every claim spec when the checkpoint finds the boot ID changed,
// before it records the new one (so a crash in between finds the reboot again). Removed rather
// than left for that prepare to rewrite: until it comes (the kubelet prepares a pod's claims
// before starting its containers) every cleanup pass would rebuild from them, and telling a
// spec's boot from its modification time would trust the wall clock.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/gpuplugin/prepare/claim_cdi.h"
#include "lib/gpuplugin/prepare/device_state.h"
#include "lib/gpuplugin/prepare/driver.h"
#include "lib/k8s/client.h"
#include "lib/k8s/objects_resource.h"

namespace dra::gpu {

// What the cleanup and the rebuild ask the API server (an interface, so that unit tests can
// answer instead).
class ClaimApi {
 public:
  virtual ~ClaimApi() = default;
  // The ResourceClaim ns/name; NotFound when it does not exist.
  virtual absl::StatusOr<nlohmann::json> Get(const std::string& ns, const std::string& name) = 0;
  // Every ResourceClaim with a device of this driver from this node's pool in its allocation and
  // a non-empty status.reservedFor.
  virtual absl::StatusOr<std::vector<k8s::ResourceClaim>> ListInUseOnNode() = 0;
};

// The API server through `client` (which must outlive the result). Listing needs `list` on
// resourceclaims cluster-wide.
std::unique_ptr<ClaimApi> ClaimApiFromClient(k8s::Client* client, std::string driver,
                                             std::string pool);

// What ReconcileCdiSpecs found.
struct SpecReconciliation {
  std::vector<std::string> rebuilt;  // claim UIDs whose record was rebuilt
  std::vector<std::string> orphans;  // spec UIDs with no record and no claim in use here
  std::vector<std::string> removed;  // orphans whose spec was removed (remove_orphans)
  std::vector<std::string> failed;   // claims in use whose record could not be rebuilt; kept
  size_t specs_without_record = 0;   // specs whose claim UID had no checkpoint entry
  absl::Status api_error;            // the API server could not be asked; every spec kept

  // One line for logs and the Node event, e.g. "rebuilt 2 prepared claims from CDI specs and the
  // API server; 1 CDI spec without a claim in use on this node left for the cleanup".
  std::string Summary(bool removed_orphans) const;
};

// Applies the rule above to the specs in `cdi` that have no entry in `checkpoint`, removing the
// orphans when `remove_orphans`. The API server is asked (only when there is such a spec) before
// the prep lock is taken; the specs are then looked at again under the lock, as for any change of
// the CDI directory. Errors: listing the directory or the checkpoint, the lock, removing a spec.
absl::StatusOr<SpecReconciliation> ReconcileCdiSpecs(ClaimApi& api, const ClaimCdi& cdi,
                                                     checkpoint::Checkpoint& checkpoint,
                                                     DeviceState& state, GpuDriver& driver,
                                                     bool remove_orphans);

// For CheckpointOptions::on_reboot: removes every claim CDI spec of this driver in `cdi_root` (the
// Go driver's ".yaml" ones too). No prepare has run in this boot yet: a plugin prepares only
// after opening the checkpoint, and the first Open of a boot is the one that finds the reboot.
std::function<absl::Status(const checkpoint::ClaimMap&)> RemoveClaimSpecsOnReboot(
    std::string cdi_root);

}  // namespace dra::gpu
