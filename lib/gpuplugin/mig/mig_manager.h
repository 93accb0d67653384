#pragma once

// Creates and destroys the MIG devices of DynamicMIG claims (docs/dynamic-mig.md "Prepare and
// unprepare") through one long-lived NVML session.
//
// Create(spec), idempotent, for a MigInfo with `dynamic` set (profile id and placement known):
//   1. the parent GPU's MIG mode on, if it is off (an activation that stays pending, a GPU that
//      needs a reset, fails with FailedPrecondition and changes nothing else);
//   2. the GPU instance of the profile at the placement: the existing one if there is one, else
//      created (an occupied placement: NVML's INSUFFICIENT_RESOURCES);
//   3. its compute instance spanning it: the existing one, else created;
//   and returns the spec completed with the MIG UUID and the instance ids.
// A repeated Create after a crash at any point finishes the same device.
//
// Destroy(spec), idempotent: the compute instances of the GPU instance at the spec's placement,
// then the GPU instance (NVML's IN_USE, e.g. a process still holding it, is an error: the
// unprepare is retried), then, on GPUs that switch MIG without a reset (Hopper and newer), MIG
// mode off once no GPU instance is left. A GPU with MIG off, or no instance at that placement, is
// success.
//
// Thread-safety: thread-safe; operations are serialized (MIG changes on one GPU must not race,
// and NVML's MIG calls are not meant to run concurrently on one device).

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/nvml/nvml.h"

namespace dra::gpu {

class MigManager {
 public:
  // `session` must outlive this object.
  explicit MigManager(const nvml::Session* session) : session_(session) {}

  absl::StatusOr<MigInfo> Create(const MigInfo& spec) const;
  absl::Status Destroy(const MigInfo& spec) const;

  // For tests (crash injection): called by Create with "start", and after each change it made
  // with "migMode", "gpuInstance", "computeInstance". Set before use; not synchronized.
  void set_stage_hook(std::function<void(const char* stage)> hook) { hook_ = std::move(hook); }

 private:
  void Stage(const char* stage) const {
    if (hook_) hook_(stage);
  }

  absl::Status MaybeDisableMigMode(const nvml::Device& gpu, const std::string& uuid) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const nvml::Session* const session_;
  std::function<void(const char*)> hook_;
  mutable absl::Mutex mu_;
};

}  // namespace dra::gpu
