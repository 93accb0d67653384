#pragma once

// Fabric Manager partitions for the GPU plugin (gate FabricManagerPartitioning,
// docs/fabric-manager.md). On NVSwitch systems the Fabric Manager (FM) service groups the GPUs
// into partitions (sets of GPU module IDs) that must be activated before their NVLinks carry
// traffic. The plugin activates the partition whose GPUs are exactly a claim's GPUs at prepare and
// deactivates it at unprepare (lib/gpuplugin/fabric/fabric_step.h).
//
//   if (fm::HasFabricManagerFabric(host_root)) {
//     ASSIGN_OR_RETURN(auto fm, fm::NvfmLibrary::Open("/driver-root",
//     fm::ConnectOptionsFromEnv())); ASSIGN_OR_RETURN(std::vector<fm::Partition> parts,
//     fm->Partitions()); RETURN_IF_ERROR(fm::ValidatePartitions(parts)); const fm::Partition* p =
//     fm::FindExactPartition(parts, {1, 2}); if (p != nullptr)
//     RETURN_IF_ERROR(fm->Activate(p->id));
//   }
//
// NvfmLibrary dlopens libnvfm.so (or libnvfm.so.1) from the driver root, searched in the same
// directories as libnvidia-ml.so.1, and talks to FM through it: fmLibInit once, then
// fmConnect/fmDisconnect around every query, activation and deactivation, fmLibShutdown at the
// end (as the Go driver does).
//
// Thread-safety: FabricManager implementations are safe to call from any thread; NvfmLibrary
// serializes its calls into the library.

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/fabricmanager/fm_abi.h"

namespace dra::fm {

struct Partition {
  abi::PartitionId id = 0;
  bool active = false;
  std::vector<unsigned int> module_ids;  // FM's physicalId of each GPU, in FM's order

  friend bool operator==(const Partition&, const Partition&) = default;
};

class FabricManager {
 public:
  virtual ~FabricManager() = default;
  // Every partition FM supports on this node, with its current state.
  virtual absl::StatusOr<std::vector<Partition>> Partitions() const = 0;
  // Idempotent: a partition already active (inactive) is left as it is.
  virtual absl::Status Activate(abi::PartitionId id) const = 0;
  virtual absl::Status Deactivate(abi::PartitionId id) const = 0;
};

// How to reach the FM service.
struct ConnectOptions {
  std::string address;  // "host:port" or a unix socket path
  bool unix_socket = true;
  unsigned int timeout_ms = 5000;
};

inline constexpr char kDefaultFmSocket[] = "/driver-root/run/nvidia-fabricmanager/socket";

// From the environment, as the Go driver: NVIDIA_FABRICMANAGER_ADDRESS set → TCP to it (empty:
// 127.0.0.1), passed to fmConnect as it is; else the unix socket NVIDIA_FABRICMANAGER_UNIX_SOCKET
// (default kDefaultFmSocket). `getenv` is for tests.
ConnectOptions ConnectOptionsFromEnv(
    const std::function<const char*(const char*)>& getenv = nullptr);

// InvalidArgument for a list FM should never report: a duplicate partition ID, a partition
// without GPUs, a module ID twice in one partition. The message names the partition.
absl::Status ValidatePartitions(const std::vector<Partition>& partitions);

// The partition whose module IDs are exactly `modules` (as sets), or null.
const Partition* FindExactPartition(const std::vector<Partition>& partitions,
                                    const std::set<unsigned int>& modules);

// Whether the node has an FM-managed NVLink fabric, looked up under `host_root` (the host's /):
// <host_root>/proc/driver/nvidia-nvswitch/devices has an entry (NVSwitch systems), or some
// <host_root>/sys/class/infiniband/*/device/vpd contains "SW_MNG" (NVLink 5 switch trays). A
// missing or unreadable path counts as "no".
bool HasFabricManagerFabric(const std::string& host_root);

// The candidate paths of the FM library under `driver_root`, in search order: libnvfm.so, then
// libnvfm.so.1, in each directory NVML is searched in (lib/nvml/nvml.h LibrarySearchPaths).
std::vector<std::string> LibrarySearchPaths(std::string_view driver_root);

class NvfmLibrary final : public FabricManager {
 public:
  // Loads the first candidate that resolves to a regular file and calls fmLibInit. NotFound
  // "libnvfm.so not found under driver root <root> (searched: ...)"; FailedPrecondition when it
  // does not load, lacks an entry point, or fmLibInit fails.
  static absl::StatusOr<std::unique_ptr<NvfmLibrary>> Open(std::string_view driver_root,
                                                           ConnectOptions options);
  static absl::StatusOr<std::unique_ptr<NvfmLibrary>> OpenLibrary(const std::string& path,
                                                                  ConnectOptions options);
  ~NvfmLibrary() override;  // fmLibShutdown, dlclose
  NvfmLibrary(const NvfmLibrary&) = delete;
  NvfmLibrary& operator=(const NvfmLibrary&) = delete;

  const std::string& library_path() const { return path_; }

  absl::StatusOr<std::vector<Partition>> Partitions() const override;
  absl::Status Activate(abi::PartitionId id) const override;
  absl::Status Deactivate(abi::PartitionId id) const override;

 private:
  struct Api {
    abi::LibInitFn* lib_init = nullptr;
    abi::LibShutdownFn* lib_shutdown = nullptr;
    abi::ConnectFn* connect = nullptr;
    abi::DisconnectFn* disconnect = nullptr;
    abi::GetSupportedFabricPartitionsFn* get_partitions = nullptr;
    abi::ActivateFabricPartitionFn* activate = nullptr;
    abi::DeactivateFabricPartitionFn* deactivate = nullptr;
  };
  NvfmLibrary(std::string path, void* handle, Api api, ConnectOptions options)
      : path_(std::move(path)), handle_(handle), api_(api), options_(std::move(options)) {}

  // Runs `op` between fmConnect and fmDisconnect. REQUIRES: mu_ held.
  absl::Status Connected(const std::function<absl::Status(abi::Handle)>& op) const;
  absl::StatusOr<std::vector<Partition>> PartitionsLocked() const;
  absl::Status SetActive(abi::PartitionId id, bool active) const;

  const std::string path_;
  void* const handle_;
  const Api api_;
  const ConnectOptions options_;
  mutable std::mutex mu_;
};

// An FM return code as a status: kSuccess → OK; else a code by kind (InvalidArgument,
// FailedPrecondition for IN_USE / NOT_SUPPORTED / NOT_CONFIGURED, DeadlineExceeded, Unavailable
// for a lost connection or an uninitialized library, Internal) with "<call>: FM_ST_<NAME> (<n>)".
absl::Status FromReturn(int code, std::string_view call);

}  // namespace dra::fm
