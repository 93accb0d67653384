#pragma once

// The NVML facade: the only way product code talks to libnvidia-ml.so.1.
//
//   ASSIGN_OR_RETURN(auto nvml, dra::nvml::Nvml::Create("/driver-root"));
//   ASSIGN_OR_RETURN(dra::nvml::Session session, nvml->Open());
//   ASSIGN_OR_RETURN(std::vector<dra::nvml::Device> gpus, session.Devices());
//   ASSIGN_OR_RETURN(std::string uuid, gpus[0].Uuid());
//
// Nvml owns the dlopen'ed library (found under a driver root in the order of docs/compatibility.md
// "Driver root"). A Session is one nvmlInitWithFlags ... nvmlShutdown bracket (NVML
// reference-counts them, so sessions may overlap). Device, MigDevice, GpuInstance and
// ComputeInstance are cheap copyable values wrapping NVML handles.
//
// Lifetimes: every value obtained through an Nvml must not outlive it. Handles are only usable
// while some session is open; after the last session closes, calls fail with
// "<function>: uninitialized" (ReturnCode::kUninitialized). MIG handles go stale when the instance
// they name is destroyed (calls then fail with kInvalidArgument).
//
// Errors: see errors.h. Every failure names the NVML function and NVML's error text, and carries
// the NVML return code.
//
// Thread-safety: Nvml is immutable after Create and may be shared by threads. Sessions and the
// value types are thread-compatible (NVML itself is thread-safe, so distinct objects may be used
// from different threads at once).

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/nvml/errors.h"
#include "lib/nvml/types.h"

namespace dra::nvml {

namespace internal {
class Library;
}  // namespace internal

class Device;
class GpuInstance;
class ComputeInstance;
class MigDevice;
class EventSet;

// One NVML session. Move-only; the destructor calls nvmlShutdown.
class Session {
 public:
  Session(Session&& other) noexcept;
  Session& operator=(Session&& other) noexcept;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();

  // Ends the session now and reports nvmlShutdown's result; later calls on this object fail.
  absl::Status Close();

  absl::StatusOr<std::string> DriverVersion() const;  // "580.126.20"
  absl::StatusOr<int> CudaDriverVersion() const;      // 13000 means CUDA 13.0
  absl::StatusOr<unsigned int> DeviceCount() const;
  absl::StatusOr<Device> DeviceByIndex(unsigned int index) const;
  absl::StatusOr<Device> DeviceByUuid(std::string_view uuid) const;  // a "GPU-..." UUID
  // Accepts "0000:18:00.0" and NVML's "00000000:18:00.0".
  absl::StatusOr<Device> DeviceByPciBusId(std::string_view bus_id) const;
  // Every GPU in NVML index order.
  absl::StatusOr<std::vector<Device>> Devices() const;
  // A MIG device by its "MIG-..." UUID.
  absl::StatusOr<MigDevice> MigDeviceByUuid(std::string_view uuid) const;
  // An empty event set (events.cc); register devices on it, then Wait.
  absl::StatusOr<EventSet> CreateEventSet() const;

 private:
  friend class Nvml;
  explicit Session(const internal::Library* library) : library_(library) {}
  absl::Status CheckOpen(std::string_view function) const;

  const internal::Library* library_;  // null once closed or moved from
};

class Nvml {
 public:
  // The candidate paths of libnvidia-ml.so.1 under `driver_root`, in search order
  // (docs/compatibility.md "Driver root"):
  // <root>/, <root>/usr/lib64, <root>/usr/lib/x86_64-linux-gnu, <root>/usr/lib/aarch64-linux-gnu,
  // <root>/lib64, <root>/lib/x86_64-linux-gnu, <root>/lib/aarch64-linux-gnu.
  static std::vector<std::string> LibrarySearchPaths(std::string_view driver_root);

  // Loads the first candidate that resolves (following symlinks) to a regular file, from its
  // resolved path. Does not initialize NVML. NotFound "libnvidia-ml.so.1 not found under driver
  // root <root> (searched: <every path>)"; FailedPrecondition when the file does not load or
  // lacks a required symbol.
  static absl::StatusOr<std::unique_ptr<Nvml>> Create(std::string_view driver_root);
  // Loads exactly `library_path`.
  static absl::StatusOr<std::unique_ptr<Nvml>> CreateFromLibrary(const std::string& library_path);

  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  ~Nvml();

  // The resolved path of the loaded library.
  const std::string& library_path() const;
  // Whether the library exports `symbol` (e.g. "nvmlDeviceGetAddressingMode").
  bool HasSymbol(const char* symbol) const;

  // nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS) by default, which succeeds with zero GPUs (all on
  // vfio-pci, say); `no_gpus_ok` false uses nvmlInit_v2. Errors name the library, e.g.
  // "nvmlInitWithFlags: driver not loaded (library /driver-root/usr/lib/.../libnvidia-ml.so.1)".
  absl::StatusOr<Session> Open(bool no_gpus_ok = true) const;

 private:
  explicit Nvml(std::unique_ptr<internal::Library> library);

  std::unique_ptr<internal::Library> library_;
};

// A full GPU.
class Device {
 public:
  absl::StatusOr<std::string> Name() const;  // "NVIDIA H100 80GB HBM3"
  absl::StatusOr<std::string> Uuid() const;  // "GPU-..."
  absl::StatusOr<unsigned int> MinorNumber() const;
  absl::StatusOr<unsigned int> Index() const;
  absl::StatusOr<PciInfo> Pci() const;
  absl::StatusOr<MemoryInfo> Memory() const;  // v2 when available
  absl::StatusOr<nvml::Architecture> Architecture() const;
  absl::StatusOr<nvml::Brand> Brand() const;
  absl::StatusOr<ComputeCapability> CudaComputeCapability() const;
  absl::StatusOr<nvml::AddressingMode> AddressingMode() const;
  absl::StatusOr<nvml::VirtualizationMode> VirtualizationMode() const;
  absl::StatusOr<unsigned int> ModuleId() const;
  // nvmlDeviceGetGpuFabricInfoV (v3) when available, else the unversioned call.
  absl::StatusOr<FabricInfo> Fabric() const;
  absl::StatusOr<bool> PersistenceMode() const;
  absl::Status SetPersistenceMode(bool enabled) const;
  absl::StatusOr<nvml::ComputeMode> ComputeMode() const;
  absl::Status SetComputeMode(nvml::ComputeMode mode) const;

  // MIG (device_mig.cc). MIG-incapable GPUs answer kNotSupported.
  absl::StatusOr<MigModeInfo> MigMode() const;
  // Returns the activation status: kSuccess when the new mode is active, kResetRequired when it
  // only became pending (GPUs that need a reset, e.g. Ampere in a VM), ...
  absl::StatusOr<ReturnCode> SetMigMode(bool enabled) const;
  // `profile_index` is NVML_GPU_INSTANCE_PROFILE_* (0 .. kGpuInstanceProfileCount-1).
  absl::StatusOr<GpuInstanceProfile> GpuInstanceProfileInfo(unsigned int profile_index) const;
  // Every profile the GPU supports (indexes answering NOT_SUPPORTED or INVALID_ARGUMENT skipped).
  absl::StatusOr<std::vector<GpuInstanceProfile>> GpuInstanceProfiles() const;
  absl::StatusOr<std::vector<Placement>> GpuInstancePossiblePlacements(
      unsigned int profile_id) const;
  absl::StatusOr<unsigned int> GpuInstanceRemainingCapacity(unsigned int profile_id) const;
  absl::StatusOr<std::vector<GpuInstance>> GpuInstances(const GpuInstanceProfile& profile) const;
  // Every GPU instance of every supported profile, ordered by id.
  absl::StatusOr<std::vector<GpuInstance>> AllGpuInstances() const;
  absl::StatusOr<GpuInstance> GpuInstanceById(unsigned int id) const;
  // Without `placement` NVML picks one. Occupied: kInsufficientResources.
  absl::StatusOr<GpuInstance> CreateGpuInstance(unsigned int profile_id,
                                                std::optional<Placement> placement = {}) const;
  absl::StatusOr<unsigned int> MaxMigDeviceCount() const;
  absl::StatusOr<MigDevice> MigDeviceByIndex(unsigned int index) const;
  // Every MIG device (indexes answering NOT_FOUND skipped).
  absl::StatusOr<std::vector<MigDevice>> MigDevices() const;

  // Events (events.cc): the kEventType* bits this GPU can report.
  absl::StatusOr<uint64_t> SupportedEventTypes() const;

  friend bool operator==(const Device& a, const Device& b) { return a.handle_ == b.handle_; }

 private:
  friend class Session;
  friend class EventSet;
  friend class GpuInstance;
  friend class ComputeInstance;
  friend class MigDevice;
  Device(const internal::Library* library, void* handle) : library_(library), handle_(handle) {}

  const internal::Library* library_;
  void* handle_;  // nvmlDevice_t
};

// A MIG device: one compute instance seen as a CUDA device.
class MigDevice {
 public:
  absl::StatusOr<std::string> Uuid() const;  // "MIG-..."
  absl::StatusOr<std::string> Name() const;  // "NVIDIA A100-SXM4-40GB MIG 1g.5gb"
  absl::StatusOr<MemoryInfo> Memory() const;
  absl::StatusOr<unsigned int> GpuInstanceId() const;
  absl::StatusOr<unsigned int> ComputeInstanceId() const;
  absl::StatusOr<MigDeviceAttributes> Attributes() const;
  absl::StatusOr<Device> Parent() const;

 private:
  friend class Device;
  friend class Session;
  friend class ComputeInstance;
  MigDevice(const internal::Library* library, void* handle) : library_(library), handle_(handle) {}

  const internal::Library* library_;
  void* handle_;  // nvmlDevice_t of the MIG device
};

class GpuInstance {
 public:
  absl::StatusOr<GpuInstanceInfo> Info() const;
  // `profile_index` is NVML_COMPUTE_INSTANCE_PROFILE_*; the engine profile is always "shared".
  absl::StatusOr<ComputeInstanceProfile> ComputeInstanceProfileInfo(
      unsigned int profile_index) const;
  // Every compute instance profile this GPU instance supports.
  absl::StatusOr<std::vector<ComputeInstanceProfile>> ComputeInstanceProfiles() const;
  absl::StatusOr<ComputeInstance> CreateComputeInstance(unsigned int profile_id) const;
  absl::StatusOr<std::vector<ComputeInstance>> ComputeInstances(
      const ComputeInstanceProfile& profile) const;
  absl::StatusOr<ComputeInstance> ComputeInstanceById(unsigned int id) const;
  // Fails with kInUse while compute instances remain.
  absl::Status Destroy() const;

 private:
  friend class Device;
  GpuInstance(const internal::Library* library, void* handle)
      : library_(library), handle_(handle) {}

  const internal::Library* library_;
  void* handle_;  // nvmlGpuInstance_t
};

class ComputeInstance {
 public:
  absl::StatusOr<ComputeInstanceInfo> Info() const;
  // The MIG device of this compute instance (from nvmlComputeInstanceGetInfo_v2).
  absl::StatusOr<MigDevice> AsMigDevice() const;
  absl::Status Destroy() const;

 private:
  friend class GpuInstance;
  ComputeInstance(const internal::Library* library, void* handle)
      : library_(library), handle_(handle) {}

  const internal::Library* library_;
  void* handle_;  // nvmlComputeInstance_t
};

// Event type bits (nvmlEventType*).
inline constexpr uint64_t kEventTypeSingleBitEccError = 0x1;
inline constexpr uint64_t kEventTypeDoubleBitEccError = 0x2;
inline constexpr uint64_t kEventTypeXidCriticalError = 0x8;

struct Event {
  Device device;
  uint64_t type = 0;
  uint64_t data = 0;                      // the XID for kEventTypeXidCriticalError
  uint32_t gpu_instance_id = 0xffffffff;  // 0xffffffff when not attributable to a MIG device
  uint32_t compute_instance_id = 0xffffffff;
};

// An NVML event set (nvmlEventSetCreate ... nvmlEventSetFree). Move-only; freed on destruction.
// Thread-compatible: one thread waits on a set at a time.
class EventSet {
 public:
  EventSet(EventSet&& other) noexcept;
  EventSet& operator=(EventSet&& other) noexcept;
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;
  ~EventSet();

  absl::Status Register(const Device& device, uint64_t event_types) const;
  // The next event, or kTimeout (absl kDeadlineExceeded) after `timeout_ms`; kGpuIsLost when a
  // GPU fell off the bus.
  absl::StatusOr<Event> Wait(unsigned int timeout_ms) const;

 private:
  friend class Session;
  EventSet(const internal::Library* library, void* handle) : library_(library), handle_(handle) {}

  const internal::Library* library_;
  void* handle_;  // nvmlEventSet_t; null once moved from
};

}  // namespace dra::nvml
