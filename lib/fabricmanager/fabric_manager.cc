#include "lib/fabricmanager/fabric_manager.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::fm {
namespace abi {

const char* ReturnName(int code) {
  switch (code) {
    case kSuccess:
      return "FM_ST_SUCCESS";
    case kBadParam:
      return "FM_ST_BADPARAM";
    case kGenericError:
      return "FM_ST_GENERIC_ERROR";
    case kNotSupported:
      return "FM_ST_NOT_SUPPORTED";
    case kUninitialized:
      return "FM_ST_UNINITIALIZED";
    case kTimeout:
      return "FM_ST_TIMEOUT";
    case kVersionMismatch:
      return "FM_ST_VERSION_MISMATCH";
    case kInUse:
      return "FM_ST_IN_USE";
    case kNotConfigured:
      return "FM_ST_NOT_CONFIGURED";
    case kConnectionNotValid:
      return "FM_ST_CONNECTION_NOT_VALID";
    case kNvlinkError:
      return "FM_ST_NVLINK_ERROR";
    default:
      return "FM_ST_UNKNOWN";
  }
}

}  // namespace abi

namespace {

namespace fs = std::filesystem;

// The directories libnvidia-ml.so.1 is searched in (lib/nvml/nvml.h), relative to the root.
constexpr const char* kLibraryDirs[] = {
    "",
    "/usr/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
};
constexpr const char* kLibraryNames[] = {"libnvfm.so", "libnvfm.so.1"};

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);  // follows links
}

template <typename Fn>
absl::Status Bind(void* handle, const char* name, Fn** out) {
  ::dlerror();
  void* sym = ::dlsym(handle, name);
  if (sym == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("libnvfm lacks entry point ", name));
  }
  *out = reinterpret_cast<Fn*>(sym);
  return absl::OkStatus();
}

std::string CString(const char* buf, size_t size) { return std::string(buf, strnlen(buf, size)); }

}  // namespace

absl::Status FromReturn(int code, std::string_view call) {
  if (code == abi::kSuccess) return absl::OkStatus();
  std::string msg = absl::StrCat(std::string(call), ": ", abi::ReturnName(code), " (", code, ")");
  switch (code) {
    case abi::kBadParam:
    case abi::kVersionMismatch:
      return absl::InvalidArgumentError(msg);
    case abi::kInUse:
    case abi::kNotSupported:
    case abi::kNotConfigured:
      return absl::FailedPreconditionError(msg);
    case abi::kTimeout:
      return absl::DeadlineExceededError(msg);
    case abi::kUninitialized:
    case abi::kConnectionNotValid:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

ConnectOptions ConnectOptionsFromEnv(const std::function<const char*(const char*)>& getenv) {
  auto get = [&](const char* name) -> const char* {
    return getenv ? getenv(name) : std::getenv(name);
  };
  ConnectOptions out;
  if (const char* addr = get("NVIDIA_FABRICMANAGER_ADDRESS"); addr != nullptr) {
    out.unix_socket = false;
    out.address = *addr != '\0' ? addr : "127.0.0.1";
    return out;
  }
  const char* socket = get("NVIDIA_FABRICMANAGER_UNIX_SOCKET");
  out.address = socket != nullptr && *socket != '\0' ? socket : kDefaultFmSocket;
  return out;
}

absl::Status ValidatePartitions(const std::vector<Partition>& partitions) {
  std::set<abi::PartitionId> ids;
  for (const Partition& p : partitions) {
    if (!ids.insert(p.id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("fabric manager reported partition ", p.id, " twice"));
    }
    if (p.module_ids.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("fabric manager reported partition ", p.id, " without GPUs"));
    }
    std::set<unsigned int> modules;
    for (unsigned int m : p.module_ids) {
      if (!modules.insert(m).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("fabric manager reported GPU module ", m, " twice in partition ", p.id));
      }
    }
  }
  return absl::OkStatus();
}

const Partition* FindExactPartition(const std::vector<Partition>& partitions,
                                    const std::set<unsigned int>& modules) {
  for (const Partition& p : partitions) {
    const std::set<unsigned int> have(p.module_ids.begin(), p.module_ids.end());
    if (have == modules) return &p;
  }
  return nullptr;
}

bool HasFabricManagerFabric(const std::string& host_root) {
  std::error_code ec;
  const fs::path nvswitch = fs::path(host_root) / "proc/driver/nvidia-nvswitch/devices";
  if (fs::is_directory(nvswitch, ec)) {
    fs::directory_iterator it(nvswitch, ec);
    if (!ec && it != fs::directory_iterator()) return true;
  }
  const fs::path ib = fs::path(host_root) / "sys/class/infiniband";
  fs::directory_iterator it(ib, ec);
  if (ec) return false;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return false;
    std::ifstream vpd(it->path() / "device/vpd", std::ios::binary);
    if (!vpd) continue;
    const std::string data((std::istreambuf_iterator<char>(vpd)), std::istreambuf_iterator<char>());
    if (data.find("SW_MNG") != std::string::npos) return true;
  }
  return false;
}

std::vector<std::string> LibrarySearchPaths(std::string_view driver_root) {
  std::string root(driver_root);
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (root == "/") root.clear();
  std::vector<std::string> out;
  for (const char* dir : kLibraryDirs) {
    for (const char* name : kLibraryNames) out.push_back(absl::StrCat(root, dir, "/", name));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<NvfmLibrary>> NvfmLibrary::Open(std::string_view driver_root,
                                                               ConnectOptions options) {
  const std::vector<std::string> candidates = LibrarySearchPaths(driver_root);
  for (const std::string& c : candidates) {
    if (!IsRegularFile(c)) continue;
    std::error_code ec;
    const fs::path real = fs::canonical(c, ec);
    return OpenLibrary(ec ? c : real.string(), std::move(options));
  }
  return absl::NotFoundError(absl::StrCat("libnvfm.so not found under driver root ",
                                          std::string(driver_root),
                                          " (searched: ", absl::StrJoin(candidates, ", "), ")"));
}

absl::StatusOr<std::unique_ptr<NvfmLibrary>> NvfmLibrary::OpenLibrary(const std::string& path,
                                                                      ConnectOptions options) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = ::dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("dlopen ", path, ": ", reason != nullptr ? reason : "unknown error"));
  }
  Api api;
  absl::Status s = Bind(handle, "fmLibInit", &api.lib_init);
  if (s.ok()) s = Bind(handle, "fmLibShutdown", &api.lib_shutdown);
  if (s.ok()) s = Bind(handle, "fmConnect", &api.connect);
  if (s.ok()) s = Bind(handle, "fmDisconnect", &api.disconnect);
  if (s.ok()) s = Bind(handle, "fmGetSupportedFabricPartitions", &api.get_partitions);
  if (s.ok()) s = Bind(handle, "fmActivateFabricPartition", &api.activate);
  if (s.ok()) s = Bind(handle, "fmDeactivateFabricPartition", &api.deactivate);
  if (s.ok()) s = FromReturn(api.lib_init(), "fmLibInit");
  if (!s.ok()) {
    ::dlclose(handle);
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", s.message()));
  }
  DRA_INFO("loaded the Fabric Manager library", "path", path, "address", options.address,
           "unixSocket", options.unix_socket);
  return std::unique_ptr<NvfmLibrary>(new NvfmLibrary(path, handle, api, std::move(options)));
}

NvfmLibrary::~NvfmLibrary() {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Status s = FromReturn(api_.lib_shutdown(), "fmLibShutdown");
  if (!s.ok()) DRA_WARNING("Fabric Manager library shutdown failed", "err", s);
  ::dlclose(handle_);
}

absl::Status NvfmLibrary::Connected(const std::function<absl::Status(abi::Handle)>& op) const {
  abi::ConnectParams params{};
  params.version = abi::kConnectParamsVersion;
  if (options_.address.size() >= sizeof(params.address_info)) {
    return absl::InvalidArgumentError(absl::StrCat("fabric manager address is longer than ",
                                                   sizeof(params.address_info) - 1,
                                                   " bytes: ", options_.address));
  }
  std::memcpy(params.address_info, options_.address.data(), options_.address.size());
  params.timeout_ms = options_.timeout_ms;
  params.address_is_unix_socket = options_.unix_socket ? 1 : 0;
  abi::Handle handle = nullptr;
  RETURN_IF_ERROR(Annotate(FromReturn(api_.connect(&params, &handle), "fmConnect"),
                           absl::StrCat("connect to the fabric manager at ", options_.address)));
  absl::Status s = op(handle);
  const absl::Status d = FromReturn(api_.disconnect(handle), "fmDisconnect");
  if (!d.ok()) DRA_WARNING("fabric manager disconnect failed", "err", d);
  return s;
}

absl::StatusOr<std::vector<Partition>> NvfmLibrary::PartitionsLocked() const {
  auto list = std::make_unique<abi::PartitionList>();  // ~130 KiB: not on the stack
  std::memset(list.get(), 0, sizeof(*list));
  list->version = abi::kPartitionListVersion;
  RETURN_IF_ERROR(Connected([&](abi::Handle h) {
    return FromReturn(api_.get_partitions(h, list.get()), "fmGetSupportedFabricPartitions");
  }));
  if (list->num_partitions > abi::kMaxFabricPartitions) {
    return absl::InternalError(absl::StrCat("fmGetSupportedFabricPartitions reported ",
                                            list->num_partitions, " partitions, more than ",
                                            abi::kMaxFabricPartitions));
  }
  std::vector<Partition> out;
  for (unsigned int i = 0; i < list->num_partitions; ++i) {
    const abi::PartitionInfo& info = list->partition_info[i];
    if (info.num_gpus > abi::kMaxNumGpus) {
      return absl::InternalError(absl::StrCat("fabric partition ", info.partition_id, " has ",
                                              info.num_gpus, " GPUs, more than ",
                                              abi::kMaxNumGpus));
    }
    Partition p{.id = info.partition_id, .active = info.is_active != 0};
    for (unsigned int g = 0; g < info.num_gpus; ++g) {
      p.module_ids.push_back(info.gpu_info[g].physical_id);
    }
    DRA_VLOG(6, "fabric partition", "id", p.id, "active", p.active, "modules",
             absl::StrJoin(p.module_ids, ","), "firstUuid",
             info.num_gpus > 0 ? CString(info.gpu_info[0].uuid, abi::kUuidBufferSize) : "");
    out.push_back(std::move(p));
  }
  return out;
}

absl::StatusOr<std::vector<Partition>> NvfmLibrary::Partitions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return PartitionsLocked();
}

absl::Status NvfmLibrary::SetActive(abi::PartitionId id, bool active) const {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::vector<Partition> partitions, PartitionsLocked());
  auto it = std::find_if(partitions.begin(), partitions.end(),
                         [&](const Partition& p) { return p.id == id; });
  if (it == partitions.end()) {
    return absl::NotFoundError(absl::StrCat("fabric manager has no partition ", id));
  }
  if (it->active == active) {
    DRA_VLOG(4, active ? "fabric partition already active" : "fabric partition already inactive",
             "partition", id);
    return absl::OkStatus();
  }
  return Connected([&](abi::Handle h) {
    return active ? FromReturn(api_.activate(h, id), "fmActivateFabricPartition")
                  : FromReturn(api_.deactivate(h, id), "fmDeactivateFabricPartition");
  });
}

absl::Status NvfmLibrary::Activate(abi::PartitionId id) const { return SetActive(id, true); }
absl::Status NvfmLibrary::Deactivate(abi::PartitionId id) const { return SetActive(id, false); }

}  // namespace dra::fm
