#pragma once

// The per-claim MPS control daemon (docs/mps.md): for a group of devices that a claim
// shares with strategy MPS, the plugin runs one `nvidia-cuda-mps-control -d` in a Deployment of
// its own, pinned to this node, and hands the workload containers the daemon's pipe directory and
// a shared /dev/shm through CDI edits.
//
// What exists per daemon (id = "<claimUID>-<first 5 hex of sha256(sorted UUIDs joined by ',')>"):
//   <pluginDataDir>/mps/<id>/shm   tmpfs (size MemTotal/2), the workloads' and daemon's /dev/shm
//   <pluginDataDir>/mps/<id>/pipe  the daemon's control pipe (CUDA_MPS_PIPE_DIRECTORY)
//   <pluginDataDir>/mps/<id>/log   control.log and startup.log (CUDA_MPS_LOG_DIRECTORY)
//   Deployment <namespace>/mps-control-daemon-<id> (mps_daemon_template.h)
//   compute mode EXCLUSIVE_PROCESS on the group's full GPUs (MIG devices have none)
//
// Typical use from prepare and unprepare:
//
//   ASSIGN_OR_RETURN(auto daemon, MpsControlDaemon::Create(env, group));
//   record the daemon->Record() in the checkpoint (PrepareStarted), then
//   RETURN_IF_ERROR(daemon->Start());
//   RETURN_IF_ERROR(daemon->AssertReady(deadline));
//   edits.Append(daemon->ContainerEdits());          // for every device of the group
//   ...
//   RETURN_IF_ERROR(StopMpsControlDaemon(env, record));  // unprepare, from the checkpoint alone
//
// Every step is idempotent: Start after a partial Start completes it, Stop after a partial Start
// or a partial Stop removes what is left. Stop removes the id directory last, so the directory
// is the marker that something may remain.
//
// Thread-safety: an MpsControlDaemon and StopMpsControlDaemon may be used from any thread; two
// calls for the same id must not run concurrently (the device state serializes per claim).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "lib/api/types.h"
#include "lib/cdi/spec.h"
#include "lib/common/clock.h"
#include "lib/k8s/client.h"
#include "lib/k8s/resource_info.h"
#include "nlohmann/json.hpp"

namespace dra::gpu {

inline constexpr k8s::ResourceInfo kDeploymentResource{"apps", "v1", "Deployment", "deployments",
                                                       true};

// The compute modes the daemon sets through the injected setter.
inline constexpr absl::string_view kComputeModeExclusiveProcess = "EXCLUSIVE_PROCESS";
inline constexpr absl::string_view kComputeModeDefault = "DEFAULT";

// Where the workload containers find the daemon.
inline constexpr absl::string_view kMpsPipeDirInContainer = "/tmp/nvidia-mps";
inline constexpr absl::string_view kMpsShmDirInContainer = "/dev/shm";

// Sets the compute mode of one full GPU ("nvidia-smi -i <uuid> -c <mode>").
using ComputeModeSetter =
    std::function<absl::Status(const std::string& uuid, absl::string_view mode)>;

// The host-side mount operations, injectable for tests. The defaults use /proc/self/mountinfo,
// mount(2) and umount2(2), so they act in the mount namespace of the calling process: the
// plugin must run where the kubelet and the container runtime see its plugin data directory.
struct MountOps {
  // Whether `path` is a mount point.
  std::function<absl::StatusOr<bool>(const std::string& path)> is_mount_point;
  // mount -t tmpfs -o <options> <source> <target>
  std::function<absl::Status(const std::string& source, const std::string& target,
                             const std::string& options)>
      mount_tmpfs;
  // umount <target>; a target that is not mounted is an error here (the caller checks first).
  std::function<absl::Status(const std::string& target)> unmount;

  static MountOps Real();
};

// What every daemon of this plugin shares: the plugin's flags (docs/compatibility.md "Flags and
// environment variables") and its dependencies.
struct MpsDaemonEnv {
  std::string node_name;                        // --node-name: the daemon pod's nodeName
  std::string ns;                               // --namespace: where the Deployments live
  std::string image;                            // --image-name
  std::vector<std::string> image_pull_secrets;  // --image-pull-secrets, already split
  std::string image_pull_policy;                // --image-pull-policy; "" = Kubernetes default
  std::string service_account;                  // --service-account-name; "" = default
  std::string host_driver_root;       // --nvidia-driver-root: hostPath of the daemon's /driver-root
  std::string container_driver_root;  // --container-driver-root; "" = host_driver_root
  // <--kubelet-plugins-directory-path>/gpu.nvidia.com, as the kubelet's node sees it.
  std::string plugin_data_dir;
  std::string feature_gates;  // FEATURE_GATES of the daemon pod: "A=true,B=false"

  k8s::Client* client = nullptr;       // required; not owned
  ComputeModeSetter set_compute_mode;  // required
  MountOps mounts = MountOps::Real();
  Clock* clock = RealClock::Get();
  std::string meminfo_path = "/proc/meminfo";  // MemTotal sizes the tmpfs

  // AssertReady: attempts (spec: 4), delays in [1 s, 2 s] doubling, capped at 10 s.
  int ready_attempts = 4;
  // Stop: how long to wait for the daemon's pods to disappear after deleting the Deployment.
  absl::Duration stop_timeout = absl::Seconds(30);
  absl::Duration stop_poll_interval = absl::Milliseconds(250);
};

// The devices of one claim's config group that share through MPS.
struct MpsDaemonGroup {
  std::string claim_uid;
  // Empty: MpsDaemonId(claim_uid, device_uuids). Set (DynamicMIG): the id the group had when it
  // was planned, before its MIG devices existed, so that the recorded id names this daemon.
  std::string id;
  std::vector<std::string> device_uuids;    // every device of the group: GPU and MIG UUIDs
  std::vector<std::string> full_gpu_uuids;  // the full GPUs among them (compute mode)
  api::MpsConfig config;                    // normalized and validated
  // From api::ResolvePinnedMemoryLimits(config, device_uuids): MiB per device UUID.
  std::map<std::string, int64_t> pinned_memory_limits_mib;
};

// What unprepare needs to stop a daemon, kept in the checkpoint beside the prepared devices.
struct MpsDaemonRecord {
  std::string id;
  std::string ns;  // the namespace of its Deployment (the flag may change across restarts)
  std::vector<std::string> full_gpu_uuids;

  friend bool operator==(const MpsDaemonRecord&, const MpsDaemonRecord&) = default;
};

// {"id": ..., "namespace": ..., "fullGpuUUIDs": [...]}
nlohmann::json MpsDaemonRecordToJson(const MpsDaemonRecord& record);
absl::StatusOr<MpsDaemonRecord> MpsDaemonRecordFromJson(const nlohmann::json& j);

// "<claimUID>-<first 5 hex chars of sha256(join(sorted(uuids), ","))>".
std::string MpsDaemonId(absl::string_view claim_uid, std::vector<std::string> device_uuids);
// "mps-control-daemon-<id>".
std::string MpsDeploymentName(absl::string_view id);
// <plugin_data_dir>/mps/<id>
std::string MpsDaemonDir(absl::string_view plugin_data_dir, absl::string_view id);

class MpsControlDaemon {
 public:
  // Validates the group and the env (InvalidArgument naming the field): claim UID and UUIDs of
  // the characters Kubernetes and NVIDIA use ([A-Za-z0-9-], and '/' in old MIG UUIDs), full GPUs
  // a subset of the devices, limits for devices of the group and >= 1 MiB, thread percentage in
  // 0..100. These values end up in a shell command line of the daemon pod.
  static absl::StatusOr<std::unique_ptr<MpsControlDaemon>> Create(MpsDaemonEnv env,
                                                                  MpsDaemonGroup group);

  const std::string& Id() const { return id_; }
  std::string DeploymentName() const { return MpsDeploymentName(id_); }
  MpsDaemonRecord Record() const;

  // Host directories, tmpfs, compute mode EXCLUSIVE_PROCESS on the full GPUs, Deployment (an
  // existing one is kept). Idempotent.
  absl::Status Start();

  // Waits (env.ready_attempts with backoff, never past `deadline`) until the Deployment reports
  // one ready replica and exactly one pod matches it, Running with its container Ready. The error
  // (Unavailable) says what is missing: the Deployment, the pod (and why it is Pending), the
  // container's state and last termination, the newest Warning event of the pod.
  absl::Status AssertReady(absl::Time deadline);

  // The edits for every workload container using the group's devices.
  cdi::ContainerEdits ContainerEdits() const;

  // The Deployment object Start creates.
  absl::StatusOr<nlohmann::json> RenderDeployment() const;

  // StopMpsControlDaemon(env, Record()).
  absl::Status Stop();

 private:
  MpsControlDaemon(MpsDaemonEnv env, MpsDaemonGroup group, std::string id);

  // One look at the Deployment and its pods: OK when ready, else Unavailable saying why.
  absl::Status CheckReadyOnce();

  const MpsDaemonEnv env_;
  const MpsDaemonGroup group_;
  const std::string id_;
};

// Stops the daemon `record` describes: nothing when <pluginDataDir>/mps/<id> does not exist;
// else deletes the Deployment (Foreground; NotFound is fine) and waits (env.stop_timeout) until
// it and its pods are gone, sets compute mode DEFAULT on the full GPUs, unmounts the tmpfs (as
// often as it is mounted) and removes the directory. Idempotent; after a failure, calling it
// again finishes the job.
absl::Status StopMpsControlDaemon(const MpsDaemonEnv& env, const MpsDaemonRecord& record);

}  // namespace dra::gpu
