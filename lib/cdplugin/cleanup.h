#pragma once

// Background cleanups of the compute-domain plugin (docs/compute-domains.md "Cleanup"):
//
// RunCheckpointPass: for each PrepareStarted claim with a name, look it up in the API server;
// when it is gone (or has another UID) the claim's pod will never come, so the claim is
// unprepared (it becomes PrepareAborted and its node label goes). Other lookup errors skip the
// claim until the next pass. Then PrepareAborted entries older than `aborted_ttl` (90 s: two
// kubelet call windows, long enough that a late retry of the same prepare is refused) are erased.
//
// RemoveStaleDomainDirs: every subdirectory of <data dir>/domains/ whose name is not the UID of a
// ComputeDomain in the cache, and which no recorded claim names, is removed. Run only once the
// cache has synced (an empty cache would remove everything).
//
// Thread-safety: one pass at a time (the plugin's cleanup thread); concurrent with prepares.

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "lib/cdplugin/device_state.h"
#include "lib/cdplugin/domain_api.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/common/clock.h"

namespace dra::cdplugin {

inline constexpr absl::Duration kAbortedTtl = absl::Seconds(90);

class Cleanup {
 public:
  // Every pointer must outlive the cleanup.
  Cleanup(DeviceState* state, checkpoint::Checkpoint* checkpoint, DomainApi* api,
          Clock* clock = nullptr, absl::Duration aborted_ttl = kAbortedTtl);

  absl::Status RunCheckpointPass();
  absl::Status RemoveStaleDomainDirs();

 private:
  DeviceState* const state_;
  checkpoint::Checkpoint* const checkpoint_;
  DomainApi* const api_;
  Clock* const clock_;
  const absl::Duration aborted_ttl_;
};

}  // namespace dra::cdplugin
