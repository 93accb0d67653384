#pragma once

// The CDI specs of the compute-domain plugin, in --cdi-root (docs/compute-domains.md "CDI"):
//
//   k8s.compute-domain.nvidia.com-device_base.json   kind k8s.compute-domain.nvidia.com/device,
//       one device "all": the driver's control device nodes, libraries and binaries (but not
//       nvidia-imex / nvidia-imex-ctl, which the daemon claim mounts itself) and
//       NVIDIA_VISIBLE_DEVICES=void. Written at startup; the daemon claim uses it.
//   k8s.compute-domain.nvidia.com-claim_<claimUID>.json   kind k8s.compute-domain.nvidia.com/claim,
//       one device "<claimUID>-<device>" (e.g. "<uid>-channel-0", "<uid>-daemon-0") per prepared
//       device that has edits; no file when none has.
//
// Edits:
//   channel   deviceNodes /dev/nvidia-caps-imex-channels/channel<N> (type c, the
//             nvidia-caps-imex-channels major, minor N, fileMode 0666, no host path: the runtime
//             creates the node) for N in [0, 1) or [0, 2048) with allocationMode All;
//   daemon    env CLIQUE_ID, COMPUTE_DOMAIN_UUID, COMPUTE_DOMAIN_NAME, COMPUTE_DOMAIN_NAMESPACE;
//             mount /imexd <- <data dir>/domains/<cdUID> (rw,nosuid,nodev,bind);
//             mounts /usr/bin/nvidia-imex and /usr/bin/nvidia-imex-ctl <- the driver root's
//             binaries (host view; ro,nosuid,nodev,rbind,rprivate);
//             with a clique ID: deviceNode /dev/nvidia-caps/nvidia-cap<minor> of the
//             fabric-imex-mgmt capability (type c, nvidia-caps major, the capability's mode).
//
// Thread-safety: immutable after Create; claims may be written and removed concurrently.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "lib/cdi/spec.h"
#include "lib/cdi/transient_specs.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/driverroot/device_nodes.h"
#include "lib/driverroot/driver_root.h"

namespace dra::cdplugin {

inline constexpr char kCdiClaimKind[] = "k8s.compute-domain.nvidia.com/claim";
inline constexpr char kCdiDeviceKind[] = "k8s.compute-domain.nvidia.com/device";
inline constexpr char kBaseSpecId[] = "base";
inline constexpr char kBaseDeviceName[] = "all";
inline constexpr int kImexChannelCount = 2048;
inline constexpr char kImexdContainerPath[] = "/imexd";

// Channels [0, count) of the nvidia-caps-imex-channels device with major `major`.
cdi::ContainerEdits ChannelEdits(int64_t major, int count);

struct DaemonEditsInput {
  std::string clique_id;
  std::string domain_uid;
  std::string domain_name;
  std::string domain_namespace;
  std::string domain_dir;      // host path of <data dir>/domains/<cdUID>
  std::string imex_host_path;  // host path of the driver root's nvidia-imex
  std::string imex_ctl_host_path;
  std::optional<driverroot::DeviceNodeInfo> imex_mgmt_capability;  // set iff clique_id != ""
};
cdi::ContainerEdits DaemonEdits(const DaemonEditsInput& in);

// The fabric-imex-mgmt capability node: "<proc root>/driver/nvidia/capabilities/fabric-imex-mgmt"
// parsed (DeviceFileMinor, DeviceFileMode) with the nvidia-caps major of "<proc root>/devices".
absl::StatusOr<driverroot::DeviceNodeInfo> ImexManagementCapability(
    const driverroot::DriverRoot& root);

class CdiSpecs {
 public:
  static absl::StatusOr<std::unique_ptr<CdiSpecs>> Create(const std::string& cdi_root);

  // "k8s.compute-domain.nvidia.com/device=all".
  static std::string BaseDeviceId();
  // "k8s.compute-domain.nvidia.com/claim=<claimUID>-<device>".
  static std::string ClaimDeviceId(const std::string& claim_uid, const std::string& device);

  // Discovers the driver files under `root` and writes the base spec (host paths).
  absl::StatusOr<std::string> WriteBaseSpec(const driverroot::DriverRoot& root) const;
  // Writes the claim's spec with one device per entry of `device_edits` (key: device name such
  // as "channel-0"); entries with empty edits are left out, and no entry left removes the file.
  // Returns the CDI device IDs by device name.
  absl::StatusOr<std::map<std::string, std::string>> WriteClaimSpec(
      const std::string& claim_uid,
      const std::map<std::string, cdi::ContainerEdits>& device_edits) const;
  absl::Status RemoveClaimSpec(const std::string& claim_uid) const;
  // Removes every claim spec (not the base spec); returns how many claims had one.
  absl::StatusOr<int> RemoveAllClaimSpecs() const;

 private:
  CdiSpecs(std::unique_ptr<cdi::TransientSpecDir> claims,
           std::unique_ptr<cdi::TransientSpecDir> base)
      : claims_(std::move(claims)), base_(std::move(base)) {}
  std::unique_ptr<cdi::TransientSpecDir> claims_;
  std::unique_ptr<cdi::TransientSpecDir> base_;
};

// For CheckpointOptions::on_reboot: the claims' specs go with their records when the node
// rebooted. What they describe (channels of a domain, a daemon's mounts) is prepared again by the
// kubelet's prepare after the reboot, which writes them anew; a spec of a claim that is not
// prepared again would otherwise stay (unprepare of a claim without a record removes nothing).
// `specs` must outlive the result.
std::function<absl::Status(const checkpoint::ClaimMap&)> RemoveClaimSpecsOnReboot(
    const CdiSpecs* specs);

}  // namespace dra::cdplugin
