#pragma once

// Periodic cleanup of prepared state whose claim is gone (docs/prepare-flow.md "Periodic cleanup";
// more than the Go driver's): every checkpointed claim, in any state, whose ResourceClaim no longer
// exists or was replaced (another UID under the same name) is unprepared; CDI spec files of claims
// the checkpoint does not hold (left by a crash between writing the spec and the checkpoint) are
// removed.
//
// Thread-safety: RunOnce from one thread at a time.

#include "absl/status/status.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/gpu/claim_cdi.h"
#include "lib/gpu/driver.h"
#include "lib/k8s/client.h"

namespace dra::gpu {

class Cleanup {
 public:
  // Everything must outlive this object.
  Cleanup(k8s::Client* client, checkpoint::Checkpoint* checkpoint, const ClaimCdi* cdi,
          GpuDriver* driver)
      : client_(client), checkpoint_(checkpoint), cdi_(cdi), driver_(driver) {}

  // One pass. Transient API errors leave the claim for the next pass; the first error is
  // returned after the pass completes.
  absl::Status RunOnce();

 private:
  k8s::Client* const client_;
  checkpoint::Checkpoint* const checkpoint_;
  const ClaimCdi* const cdi_;
  GpuDriver* const driver_;
};

}  // namespace dra::gpu
