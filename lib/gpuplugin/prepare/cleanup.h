#pragma once

// Periodic cleanup of prepared state whose claim is gone (docs/prepare-flow.md "Periodic cleanup";
// more than the Go driver's): every checkpointed claim, in any state, whose ResourceClaim no longer
// exists or was replaced (another UID under the same name) is unprepared. CDI spec files of claims
// the checkpoint does not hold go through ReconcileCdiSpecs (rebuild.h): the record of a claim the
// API server says is still in use on this node is rebuilt (its record was lost with a corrupt
// checkpoint), any other such spec (left by a crash between writing the spec and the checkpoint)
// is removed, and none is removed while the API server cannot say.
//
// Thread-safety: RunOnce from one thread at a time.

#include "absl/status/status.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/gpuplugin/prepare/claim_cdi.h"
#include "lib/gpuplugin/prepare/device_state.h"
#include "lib/gpuplugin/prepare/driver.h"
#include "lib/gpuplugin/prepare/rebuild.h"

namespace dra::gpu {

class Cleanup {
 public:
  // Everything must outlive this object.
  Cleanup(ClaimApi* api, checkpoint::Checkpoint* checkpoint, const ClaimCdi* cdi,
          DeviceState* state, GpuDriver* driver)
      : api_(api), checkpoint_(checkpoint), cdi_(cdi), state_(state), driver_(driver) {}

  // One pass. Transient API errors leave the claim (or the CDI specs) for the next pass; the
  // first error is returned after the pass completes.
  absl::Status RunOnce();

 private:
  ClaimApi* const api_;
  checkpoint::Checkpoint* const checkpoint_;
  const ClaimCdi* const cdi_;
  DeviceState* const state_;
  GpuDriver* const driver_;
};

}  // namespace dra::gpu
