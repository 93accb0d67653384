#pragma once

// MPS sharing as prepare and unprepare see it (docs/mps.md): the seam between the
// device state and the per-claim control daemons of mps_daemon.h, plus the prepare-time checks
// of a config group that shares through MPS.
//
//   MpsDaemons* mps = ...;  // MpsDaemons::Real(env) in the plugin, a fake in tests
//   ASSIGN_OR_RETURN(MpsDaemonGroup group, MpsGroupFor(uid, config, devices));
//   ASSIGN_OR_RETURN(auto daemon, mps->Create(group));   // validates; nothing happens yet
//   checkpoint the daemon->Record() (PrepareStarted), then daemon->Start(),
//   daemon->AssertReady(deadline), and daemon->ContainerEdits() for each device of the group;
//   unprepare: mps->Stop(record).
//
// Thread-safety: as mps_daemon.h (the device state serializes calls per claim).

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/api/types.h"
#include "lib/cdi/spec.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/gpuplugin/mps/mps_daemon.h"

namespace dra::gpu {

// One control daemon of a config group (MpsControlDaemon behind an interface).
class MpsDaemon {
 public:
  virtual ~MpsDaemon() = default;
  virtual MpsDaemonRecord Record() const = 0;
  virtual absl::Status Start() = 0;
  virtual absl::Status AssertReady(absl::Time deadline) = 0;
  virtual cdi::ContainerEdits ContainerEdits() const = 0;
};

// Makes daemons and stops recorded ones.
class MpsDaemons {
 public:
  virtual ~MpsDaemons() = default;
  // MpsControlDaemon::Create: validates the env and the group; starts nothing.
  virtual absl::StatusOr<std::unique_ptr<MpsDaemon>> Create(MpsDaemonGroup group) const = 0;
  // StopMpsControlDaemon: idempotent; nothing to do for a daemon that never started.
  virtual absl::Status Stop(const MpsDaemonRecord& record) const = 0;

  // The real daemons of mps_daemon.h with `env` (its client must outlive the returned object).
  static std::unique_ptr<MpsDaemons> Real(MpsDaemonEnv env);
};

// The compute capability a device publishes (attribute cudaComputeCapability, "7.5.0"), as
// {major, minor}; nullopt when absent or unparsable.
std::optional<std::pair<int, int>> ComputeCapabilityOf(const AllocatableDevice& device);

// The MPS settings of `config`, or nullopt when it does not share through MPS. The config is
// normalized, so mpsConfig is present for strategy MPS.
std::optional<api::MpsConfig> MpsConfigOf(const api::Config& config);

// DynamicMIG: the stand-in for the UUID of dynamic MIG device `device_name` in a planned group,
// "dynamic-mig/<device name>" (the MIG device exists only once migDevices created it).
std::string DynamicMigUuidPlaceholder(const std::string& device_name);

// A planned group with the stand-ins replaced by the UUIDs of `created` (device name -> UUID),
// its pinned memory limits resolved again and its id kept: the group the daemon starts with.
// NotFound naming the device when one was not created.
absl::StatusOr<MpsDaemonGroup> WithCreatedMigUuids(
    MpsDaemonGroup planned, const std::map<std::string, std::string>& created);

// The daemon group of a claim's config group with MPS: device and full-GPU UUIDs (each once),
// pinned memory limits resolved against the UUIDs (api::ResolvePinnedMemoryLimits). Permanent
// config errors (api::IsPermanentConfigError): a bad limit, and `multiUser: true` on a device
// whose compute capability is below 7.0 (Volta) or unknown, naming the device. A dynamic MIG
// device has no UUID yet: its stand-in (DynamicMigUuidPlaceholder) is used, and the group's id is
// fixed (MpsDaemonGroup::id) so that it stays the same once WithCreatedMigUuids replaced them.
absl::StatusOr<MpsDaemonGroup> MpsGroupFor(const std::string& claim_uid,
                                           const api::MpsConfig& config,
                                           const std::vector<const AllocatableDevice*>& devices);

}  // namespace dra::gpu
