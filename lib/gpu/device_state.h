#pragma once

// Prepare and unprepare of GPU and static-MIG claims (spec gpu-driver.md 5.4-5.6): resolves the
// claim's configs, checks that no device is already held by another prepared claim, writes the
// claim's CDI spec, and records everything in the checkpoint so that unprepare works from the
// checkpoint alone. Both operations are idempotent.
//
// Crash consistency: a claim is marked PrepareStarted before any step with a side effect outside
// this process's files (none exist yet for full GPUs and static MIG devices, so those go straight
// to PrepareCompleted after the CDI spec is written); a crash before PrepareCompleted leaves at
// most a CDI spec that the retried prepare rewrites or the cleanup removes.
//
// Thread-safety: Prepare/Unprepare may be called from any thread; they serialize on an internal
// mutex (the caller adds the cross-process flock).

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/common/feature_gates.h"
#include "lib/gpu/claim_cdi.h"
#include "lib/gpu/inventory.h"
#include "lib/gpu/prepared.h"
#include "lib/k8s/objects_resource.h"

namespace dra::gpu {

inline constexpr char kDriverName[] = "gpu.nvidia.com";

class DeviceState {
 public:
  struct Options {
    std::string driver_name = kDriverName;
    std::string pool_name;  // the node name
    const FeatureGates* gates = nullptr;
  };

  // `cdi`, `checkpoint` and `gates` must outlive this object.
  DeviceState(Inventory inventory, const ClaimCdi* cdi, checkpoint::Checkpoint* checkpoint,
              Options options);

  // The devices prepared for `claim` (REQUIRES: allocated). Errors caused by the claim's own
  // configuration are permanent (api::IsPermanentConfigError).
  absl::StatusOr<std::vector<PreparedDevice>> Prepare(const k8s::ResourceClaim& claim);
  // Undoes Prepare using the checkpoint alone; an unknown claim is success.
  absl::Status Unprepare(const std::string& claim_uid);

  const Inventory& inventory() const { return inventory_; }

  // Devices of completely prepared claims by type ("gpu", "mig", ...), as of the last checkpoint
  // write by this object (or CountPreparedDevices).
  std::map<std::string, int> PreparedDeviceCounts() const;
  // Recounts from `claims` (e.g. the checkpoint at startup).
  void CountPreparedDevices(const checkpoint::ClaimMap& claims);

 private:
  absl::StatusOr<std::vector<PreparedDevice>> PrepareLocked(const k8s::ResourceClaim& claim)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Inventory inventory_;
  const ClaimCdi* const cdi_;
  checkpoint::Checkpoint* const checkpoint_;
  const Options options_;
  absl::Mutex mu_;
  mutable absl::Mutex counts_mu_;
  std::map<std::string, int> prepared_counts_ ABSL_GUARDED_BY(counts_mu_);
};

}  // namespace dra::gpu
