#include "lib/nvml/nvml.h"

#include <sys/stat.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/common/status.h"
#include "lib/nvml/call.h"
#include "lib/nvml/library.h"

namespace dra::nvml {
namespace {

using internal::AsDevice;
using internal::Call;

// Directories searched under the driver root, in order (docs/compatibility.md "Driver root").
constexpr const char* kLibraryDirs[] = {"",
                                        "/usr/lib64",
                                        "/usr/lib/x86_64-linux-gnu",
                                        "/usr/lib/aarch64-linux-gnu",
                                        "/lib64",
                                        "/lib/x86_64-linux-gnu",
                                        "/lib/aarch64-linux-gnu"};
constexpr char kLibraryName[] = "libnvidia-ml.so.1";

// The resolved path when `path` (after following symlinks) is a regular file.
std::optional<std::string> ResolveRegularFile(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) return std::nullopt;
  std::string resolved = real;
  std::free(real);
  struct stat st;
  if (::stat(resolved.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return resolved;
}

}  // namespace

// ---- Nvml
// ----------------------------------------------------------------------------------------

std::vector<std::string> Nvml::LibrarySearchPaths(std::string_view driver_root) {
  std::string root(driver_root);
  while (!root.empty() && root.back() == '/') root.pop_back();
  std::vector<std::string> paths;
  for (const char* dir : kLibraryDirs) paths.push_back(absl::StrCat(root, dir, "/", kLibraryName));
  return paths;
}

absl::StatusOr<std::unique_ptr<Nvml>> Nvml::Create(std::string_view driver_root) {
  const std::vector<std::string> candidates = LibrarySearchPaths(driver_root);
  for (const std::string& candidate : candidates) {
    if (std::optional<std::string> resolved = ResolveRegularFile(candidate)) {
      return CreateFromLibrary(*resolved);
    }
  }
  return absl::NotFoundError(absl::StrCat(kLibraryName, " not found under driver root ",
                                          absl::string_view(driver_root.data(), driver_root.size()),
                                          " (searched: ", absl::StrJoin(candidates, ", "), ")"));
}

absl::StatusOr<std::unique_ptr<Nvml>> Nvml::CreateFromLibrary(const std::string& library_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<internal::Library> library,
                   internal::Library::Open(library_path));
  return std::unique_ptr<Nvml>(new Nvml(std::move(library)));
}

Nvml::Nvml(std::unique_ptr<internal::Library> library) : library_(std::move(library)) {}

Nvml::~Nvml() = default;

const std::string& Nvml::library_path() const { return library_->path(); }

bool Nvml::HasSymbol(const char* symbol) const { return library_->HasSymbol(symbol); }

absl::StatusOr<Session> Nvml::Open(bool no_gpus_ok) const {
  const internal::Api& api = library_->api();
  absl::Status status =
      no_gpus_ok ? library_->Check(api.init_with_flags(abi::kInitFlagNoGpus), "nvmlInitWithFlags")
                 : library_->Check(api.init_v2(), "nvmlInit_v2");
  if (!status.ok()) {
    return WithReturnCode(absl::Status(status.code(), absl::StrCat(status.message(), " (library ",
                                                                   library_->path(), ")")),
                          NvmlReturnCode(status).value_or(ReturnCode::kUnknown));
  }
  return Session(library_.get());
}

// ---- Session ------------------------------------------------------------------------------------

Session::Session(Session&& other) noexcept : library_(std::exchange(other.library_, nullptr)) {}

Session& Session::operator=(Session&& other) noexcept {
  if (this != &other) {
    Close().IgnoreError();  // the moved-over session ends; its shutdown result has no reader
    library_ = std::exchange(other.library_, nullptr);
  }
  return *this;
}

Session::~Session() { Close().IgnoreError(); }

absl::Status Session::Close() {
  if (library_ == nullptr) return absl::OkStatus();
  const internal::Library* library = std::exchange(library_, nullptr);
  return library->Check(library->api().shutdown(), "nvmlShutdown");
}

absl::Status Session::CheckOpen(std::string_view function) const {
  if (library_ != nullptr) return absl::OkStatus();
  return WithReturnCode(
      absl::FailedPreconditionError(absl::StrCat(
          absl::string_view(function.data(), function.size()), ": nvml session is closed")),
      ReturnCode::kUninitialized);
}

absl::StatusOr<std::string> Session::DriverVersion() const {
  RETURN_IF_ERROR(CheckOpen("nvmlSystemGetDriverVersion"));
  char buffer[abi::kSystemDriverVersionBufferSize] = {};
  RETURN_IF_ERROR(Call(*library_, library_->api().system_get_driver_version,
                       "nvmlSystemGetDriverVersion", buffer,
                       static_cast<unsigned int>(sizeof(buffer))));
  return std::string(buffer);
}

absl::StatusOr<int> Session::CudaDriverVersion() const {
  RETURN_IF_ERROR(CheckOpen("nvmlSystemGetCudaDriverVersion_v2"));
  int version = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().system_get_cuda_driver_version,
                       "nvmlSystemGetCudaDriverVersion_v2", &version));
  return version;
}

absl::StatusOr<unsigned int> Session::DeviceCount() const {
  RETURN_IF_ERROR(CheckOpen("nvmlDeviceGetCount_v2"));
  unsigned int count = 0;
  RETURN_IF_ERROR(
      Call(*library_, library_->api().device_get_count, "nvmlDeviceGetCount_v2", &count));
  return count;
}

absl::StatusOr<Device> Session::DeviceByIndex(unsigned int index) const {
  RETURN_IF_ERROR(CheckOpen("nvmlDeviceGetHandleByIndex_v2"));
  abi::DeviceHandle handle = nullptr;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_handle_by_index,
                       "nvmlDeviceGetHandleByIndex_v2", index, &handle));
  return Device(library_, handle);
}

absl::StatusOr<Device> Session::DeviceByUuid(std::string_view uuid) const {
  RETURN_IF_ERROR(CheckOpen("nvmlDeviceGetHandleByUUID"));
  const std::string text(uuid);
  abi::DeviceHandle handle = nullptr;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_handle_by_uuid,
                       "nvmlDeviceGetHandleByUUID", text.c_str(), &handle));
  unsigned int is_mig = 0;
  if (library_->api().device_is_mig_device_handle != nullptr &&
      library_->api().device_is_mig_device_handle(handle, &is_mig) == abi::kSuccess && is_mig) {
    return WithReturnCode(absl::InvalidArgumentError(absl::StrCat(
                              "nvmlDeviceGetHandleByUUID: ", text, " is a MIG device, not a GPU")),
                          ReturnCode::kInvalidArgument);
  }
  return Device(library_, handle);
}

absl::StatusOr<Device> Session::DeviceByPciBusId(std::string_view bus_id) const {
  RETURN_IF_ERROR(CheckOpen("nvmlDeviceGetHandleByPciBusId_v2"));
  const std::string text(bus_id);
  abi::DeviceHandle handle = nullptr;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_handle_by_pci_bus_id,
                       "nvmlDeviceGetHandleByPciBusId_v2", text.c_str(), &handle));
  return Device(library_, handle);
}

absl::StatusOr<std::vector<Device>> Session::Devices() const {
  ASSIGN_OR_RETURN(unsigned int count, DeviceCount());
  std::vector<Device> devices;
  devices.reserve(count);
  for (unsigned int i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(Device device, DeviceByIndex(i));
    devices.push_back(device);
  }
  return devices;
}

absl::StatusOr<MigDevice> Session::MigDeviceByUuid(std::string_view uuid) const {
  RETURN_IF_ERROR(CheckOpen("nvmlDeviceGetHandleByUUID"));
  const std::string text(uuid);
  abi::DeviceHandle handle = nullptr;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_handle_by_uuid,
                       "nvmlDeviceGetHandleByUUID", text.c_str(), &handle));
  unsigned int is_mig = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_is_mig_device_handle,
                       "nvmlDeviceIsMigDeviceHandle", handle, &is_mig));
  if (!is_mig) {
    return WithReturnCode(absl::InvalidArgumentError(absl::StrCat(
                              "nvmlDeviceGetHandleByUUID: ", text, " is a GPU, not a MIG device")),
                          ReturnCode::kInvalidArgument);
  }
  return MigDevice(library_, handle);
}

}  // namespace dra::nvml
