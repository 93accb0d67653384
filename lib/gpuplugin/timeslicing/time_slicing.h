#pragma once

// GPU time-slicing (docs/sharing.md "Time-slicing", gate TimeSlicingSettings): a full GPU shared
// by the containers of a claim (or, with consumable shares, of several claims) gets compute mode
// DEFAULT (any number of processes) and the claim's time-slice interval, set through the driver
// root's nvidia-smi:
//
//   nvidia-smi -i <uuid> -c DEFAULT
//   nvidia-smi compute-policy -i <uuid> --set-timeslice <0 Default | 1 Short | 2 Medium | 3 Long>
//
// Reset is the same with interval Default.
//
// MIG devices (a MigDeviceConfig with strategy TimeSlicing and a timeSlicingConfig): the
// time-slice interval is a setting of the physical GPU (`nvidia-smi compute-policy -i <GPU>`); a
// MIG device has none of its own. So a MIG device's non-Default interval is set on its parent GPU
// (SetInterval), and so applies to every MIG device of that GPU:
// - the compute mode is left alone: it is a setting of the whole GPU, and each MIG device is
//   already its own instance, not shared with other claims' devices;
// - two prepared claims on MIG devices of one parent must not ask for different non-Default
//   intervals: the later prepare fails before any change (DeviceState, with
//   MigParentIntervalsHeld of claim_steps.h); interval Default (or no timeSlicingConfig) asks for
//   nothing and sets nothing;
// - unprepare resets the parent to Default only when no other completed claim's record still
//   holds a non-Default interval on it (claim_steps.cc, ResetTimeSlices).
// Both operations are idempotent; a failure stops at the failed command and leaves the GPUs
// before it changed (the caller records the claim as PrepareStarted first, so that the rollback
// resets them).
//
// Thread-safety: const methods, callable from any thread (the device state serializes them).

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/api/types.h"
#include "lib/gpuplugin/timeslicing/nvidia_smi.h"

namespace dra::gpu {

class TimeSlicing {
 public:
  // `smi` must outlive this object.
  explicit TimeSlicing(const NvidiaSmi* smi) : smi_(smi) {}

  // For each GPU in order: compute mode DEFAULT, then the interval. Each nvidia-smi run waits at
  // most the time `deadline` leaves, and none starts once it has passed (DeadlineExceeded).
  absl::Status Apply(const std::vector<std::string>& gpu_uuids, api::TimeSliceInterval interval,
                     const Deadline& deadline = Deadline::Infinite()) const;
  // Apply(gpu_uuids, kDefault).
  absl::Status Reset(const std::vector<std::string>& gpu_uuids) const;
  // The interval alone, without touching the compute mode: for the parent GPUs of MIG devices.
  absl::Status SetInterval(const std::vector<std::string>& gpu_uuids,
                           api::TimeSliceInterval interval,
                           const Deadline& deadline = Deadline::Infinite()) const;

 private:
  const NvidiaSmi* const smi_;
};

}  // namespace dra::gpu
