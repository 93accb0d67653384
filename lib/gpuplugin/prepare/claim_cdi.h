#pragma once

// The per-claim CDI spec: one transient spec file per prepared claim,
// "<cdi root>/k8s.gpu.nvidia.com-claim_<claimUID>.json", kind "k8s.gpu.nvidia.com/claim", one
// device "<claimUID>-<device>" per prepared device (its device nodes: /dev/nvidia<minor>, DRM
// nodes, and for MIG the two nvidia-caps nodes), and the driver's common edits (control devices,
// libraries, binaries, firmware, IPC) at spec level. Host paths are rewritten from the plugin's
// view of the driver root to the host's before writing (docs/prepare-flow.md "The claim's CDI
// spec").
//
// Thread-safety: immutable after Create; Write/Remove of different claims may run concurrently.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/cdi/spec.h"
#include "lib/cdi/transient_specs.h"
#include "lib/driverroot/driver_root.h"
#include "lib/gpuplugin/record/prepared.h"

namespace dra::gpu {

inline constexpr char kCdiKind[] = "k8s.gpu.nvidia.com/claim";

class ClaimCdi {
 public:
  // Discovers the common edits once (`driver_version` from NVML; empty: detect from files).
  // `root` must outlive this object.
  static absl::StatusOr<std::unique_ptr<ClaimCdi>> Create(const driverroot::DriverRoot* root,
                                                          std::string cdi_root,
                                                          const std::string& driver_version);

  // Like Create, with the given spec-level edits (e.g. none when the driver files are missing).
  static absl::StatusOr<std::unique_ptr<ClaimCdi>> CreateWithCommonEdits(
      const driverroot::DriverRoot* root, std::string cdi_root, cdi::ContainerEdits common);

  // "k8s.gpu.nvidia.com/claim=<claimUID>-<device>".
  static std::string DeviceId(const std::string& claim_uid, const std::string& device);

  // The spec for a claim, host paths already rewritten. `device_edits` adds edits to the CDI
  // device of the prepared device with that name (e.g. the MPS pipe directory and /dev/shm);
  // they are written as given (their host paths are the node's already).
  absl::StatusOr<cdi::Spec> BuildSpec(
      const std::string& claim_uid, const std::vector<RecordedDevice>& devices,
      const std::map<std::string, cdi::ContainerEdits>& device_edits = {}) const;
  // Builds and writes the claim's spec atomically; returns the file path.
  absl::StatusOr<std::string> Write(
      const std::string& claim_uid, const std::vector<RecordedDevice>& devices,
      const std::map<std::string, cdi::ContainerEdits>& device_edits = {}) const;
  // Removes the claim's spec; a missing file is success.
  absl::Status Remove(const std::string& claim_uid) const;
  // Removes temporary spec files left by a crash mid-write. REQUIRES: the prep lock is held.
  absl::StatusOr<int> RemoveTemporaryFiles() const { return dir_->RemoveTemporaryFiles(); }
  // Claim UIDs that have a spec file (for cleanup of specs whose claim is no longer prepared).
  absl::StatusOr<std::vector<std::string>> ListClaimUids() const;

  std::string PathFor(const std::string& claim_uid) const { return dir_->PathFor(claim_uid); }

 private:
  ClaimCdi(const driverroot::DriverRoot* root, std::unique_ptr<cdi::TransientSpecDir> dir,
           cdi::ContainerEdits common)
      : root_(root), dir_(std::move(dir)), common_(std::move(common)) {}

  const driverroot::DriverRoot* const root_;
  const std::unique_ptr<cdi::TransientSpecDir> dir_;
  const cdi::ContainerEdits common_;
};

}  // namespace dra::gpu
