#pragma once

// Device metadata files (KEP-5304, gate DeviceMetadata; docs/device-metadata.md): for each request
// of a prepared claim, a JSON document that tells the workload which devices it got, and a CDI
// spec that bind-mounts it read-only into the container.
//
//   <plugin data dir>/dra-device-metadata/<namespace>_<claim>/<request>/metadata.json
//     {"apiVersion": "metadata.resource.k8s.io/v1alpha1", "kind": "DeviceMetadata",
//      "podClaimName": "<name in the pod>"        (only for claims made from a template)
//      "requests": [{"name": "<request>",
//                    "devices": [{"driver", "pool", "name", "attributes"}]}]}
//   <cdi root>/gpu.nvidia.com_metadata_<claimUID>_<request>.json
//     kind "gpu.nvidia.com/metadata", device "<claimUID>_<request>", one mount (ro, bind) of the
//     file above at
//     /var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/
//         gpu.nvidia.com-metadata.json
//     or, for a claim made from a template, .../resourceclaimtemplates/<podClaimName>/<request>/...
//
// The CDI ID "gpu.nvidia.com/metadata=<claimUID>_<request>" goes to the first prepared device of
// the request. A request is the top-level request name ("gpu" of "gpu/big"): the pod names those.
// The GPU plugin fills "attributes" only for VFIO devices (their published attributes), as the Go
// driver does; other devices carry driver, pool and name.
//
// Both files are written atomically (lib/common/atomic_file.h). Prepare writes them as the step
// "deviceMetadata" (claim_steps.h), recorded before it begins so that unprepare, the cleanup and a
// rollback remove them from the record alone (its undo data names the files).
//
// Thread-safety: immutable; calls for different claims may run concurrently.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/prepare/plan.h"
#include "nlohmann/json.hpp"

namespace dra::gpu {

inline constexpr char kDeviceMetadataStep[] = "deviceMetadata";
inline constexpr char kMetadataCdiKind[] = "gpu.nvidia.com/metadata";
inline constexpr char kMetadataApiVersion[] = "metadata.resource.k8s.io/v1alpha1";
// The annotation the resource claim controller puts on claims made from a pod's template.
inline constexpr char kPodClaimNameAnnotation[] = "resource.kubernetes.io/pod-claim-name";

struct MetadataDevice {
  std::string driver;
  std::string pool;
  std::string name;
  nlohmann::json attributes = nlohmann::json::object();  // as in the ResourceSlice
};

struct MetadataRequest {
  std::string name;  // top-level request name
  std::vector<MetadataDevice> devices;
};

struct MetadataClaim {
  std::string uid;
  std::string namespace_name;
  std::string name;
  std::optional<std::string> pod_claim_name;  // set for claims made from a template
  std::vector<MetadataRequest> requests;
};

// "gpu" of "gpu/big".
std::string TopLevelRequest(const std::string& request);

class DeviceMetadataFiles {
 public:
  // `plugin_data_dir`: the plugin's directory under the kubelet's plugins directory (the same
  // path on the host, where the runtime reads the mount source). `cdi_root`: where runtimes read
  // transient specs (/var/run/cdi).
  DeviceMetadataFiles(std::string plugin_data_dir, std::string cdi_root)
      : plugin_data_dir_(std::move(plugin_data_dir)), cdi_root_(std::move(cdi_root)) {}

  // "gpu.nvidia.com/metadata=<claimUID>_<request>".
  static std::string CdiDeviceId(const std::string& claim_uid, const std::string& request);
  // Where the workload finds the file.
  static std::string ContainerPath(const MetadataClaim& claim, const std::string& request);
  // The document for one request of `claim`.
  static nlohmann::json Document(const MetadataClaim& claim, const MetadataRequest& request);

  std::string ClaimDir(const std::string& namespace_name, const std::string& name) const;
  std::string FilePath(const std::string& namespace_name, const std::string& name,
                       const std::string& request) const;
  std::string SpecPath(const std::string& claim_uid, const std::string& request) const;

  // Writes every request's document and CDI spec. On failure, removes what it wrote (the files
  // of every request of `claim`) and returns the error naming the file.
  absl::Status Write(const MetadataClaim& claim) const;
  // Removes the files of those requests, and the claim's directory once empty. Missing files are
  // success.
  absl::Status Remove(const std::string& claim_uid, const std::string& namespace_name,
                      const std::string& name, const std::vector<std::string>& requests) const;

 private:
  absl::Status WriteRequest(const MetadataClaim& claim, const MetadataRequest& request) const;

  const std::string plugin_data_dir_;
  const std::string cdi_root_;
};

// The deviceMetadata step (external, not resumable: a failed Apply removes what it wrote).
// Undo data: {"uid", "namespace", "name", "requests": [...]}. `files` must outlive the step.
std::unique_ptr<prepare::PlanStep> DeviceMetadataStep(MetadataClaim claim,
                                                      const DeviceMetadataFiles* files);

// Its Undo. Null `files` (a plugin without the gate's wiring): FailedPrecondition.
absl::Status UndoDeviceMetadata(const DeviceMetadataFiles* files, const nlohmann::json& undo);

}  // namespace dra::gpu
