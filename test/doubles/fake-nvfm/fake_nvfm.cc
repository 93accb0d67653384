// A fake libnvfm.so.1 (the Fabric Manager API library) for tests of the GPU plugin's Fabric
// Manager partitions (docs/fabric-manager.md). It serves the partitions of a mock driver root and
// keeps their active state in a file, so a restarted plugin (a new process, a reopened library)
// sees what an earlier one activated. Files, under <root>/var/lib/mock-nvfm/:
//
//   partitions.json  {"partitions": [{"id": 1, "gpus": [1, 2]}, ...]}: each partition's GPU
//                    module IDs (FM's physicalId). Missing: fmConnect fails FM_ST_NOT_CONFIGURED.
//   state.json       {"active": [ids]}, written atomically (rename) under state.lock.
//   inject.json      optional failure injection: {"<entry point>": {"code": -7, "times": 1}}:
//                    the entry point returns `code` instead of doing its work, `times` times
//                    (absent: every time); the count is decremented in the file.
//   calls.log        one line per call that changes or reads state: "fmConnect <address>",
//                    "fmGetSupportedFabricPartitions", "fmActivateFabricPartition <id>", ...
//
// <root> is $MOCK_NVFM_ROOT, else derived from where this library lies
// (<root>/usr/lib/<triplet>/libnvfm.so.1, or any of the driver root's library directories).
// Behaviour of the real service that the plugin must cope with: activating an active partition,
// or one that shares a GPU with an active partition, fails FM_ST_IN_USE; deactivating an inactive
// one fails FM_ST_NOT_CONFIGURED; an unknown ID fails FM_ST_BADPARAM.

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "lib/fabricmanager/fm_abi.h"
#include "nlohmann/json.hpp"

namespace {

namespace abi = dra::fm::abi;
using json = nlohmann::json;

bool g_initialized = false;

std::string Root() {
  if (const char* r = std::getenv("MOCK_NVFM_ROOT"); r != nullptr && *r != '\0') return r;
  Dl_info info;
  if (::dladdr(reinterpret_cast<void*>(&Root), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string dir(info.dli_fname);
  dir = dir.substr(0, dir.rfind('/'));
  for (const char* suffix :
       {"/usr/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64",
        "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu"}) {
    const size_t n = std::strlen(suffix);
    if (dir.size() >= n && dir.compare(dir.size() - n, n, suffix) == 0) {
      return dir.substr(0, dir.size() - n);
    }
  }
  return dir;
}

std::string Dir() { return Root() + "/var/lib/mock-nvfm"; }

std::optional<json> ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

bool WriteJson(const std::string& path, const json& j) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return false;
    out << j.dump() << "\n";
    if (!out.flush()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

void Log(const std::string& line) {
  std::ofstream out(Dir() + "/calls.log", std::ios::app);
  out << line << "\n";
}

// Holds state.lock for the lifetime of the object.
class Locked {
 public:
  Locked() : fd_(::open((Dir() + "/state.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~Locked() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_;
};

// The injected result of `call`, if one is due (and counts it).
std::optional<abi::Return> Injected(const char* call) {
  const std::string path = Dir() + "/inject.json";
  std::optional<json> j = ReadJson(path);
  if (!j || !j->is_object() || !j->contains(call)) return std::nullopt;
  json& entry = (*j)[call];
  const int code = entry.value("code", static_cast<int>(abi::kGenericError));
  if (entry.contains("times")) {
    const int times = entry["times"].get<int>();
    if (times <= 0) return std::nullopt;
    entry["times"] = times - 1;
    WriteJson(path, *j);
  }
  Log(std::string(call) + " injected " + std::to_string(code));
  return static_cast<abi::Return>(code);
}

struct FakePartition {
  abi::PartitionId id;
  std::vector<unsigned int> gpus;
};

std::optional<std::vector<FakePartition>> Partitions() {
  std::optional<json> j = ReadJson(Dir() + "/partitions.json");
  if (!j || !j->contains("partitions") || !(*j)["partitions"].is_array()) return std::nullopt;
  std::vector<FakePartition> out;
  for (const json& p : (*j)["partitions"]) {
    FakePartition fp{p.value("id", 0u), {}};
    for (const json& g : p.value("gpus", json::array())) fp.gpus.push_back(g.get<unsigned int>());
    out.push_back(std::move(fp));
  }
  return out;
}

std::set<abi::PartitionId> Active() {
  std::set<abi::PartitionId> out;
  std::optional<json> j = ReadJson(Dir() + "/state.json");
  if (!j || !j->contains("active")) return out;
  for (const json& id : (*j)["active"]) out.insert(id.get<abi::PartitionId>());
  return out;
}

bool SaveActive(const std::set<abi::PartitionId>& active) {
  return WriteJson(Dir() + "/state.json", json{{"active", json(active)}});
}

bool ValidHandle(abi::Handle h) { return h != nullptr && *static_cast<int*>(h) == 0x6e76666d; }

}  // namespace

extern "C" {

// NOLINTNEXTLINE(readability-identifier-naming): the FM API names
__attribute__((visibility("default"))) abi::Return fmLibInit() {
  if (auto r = Injected("fmLibInit")) return *r;
  g_initialized = true;
  return abi::kSuccess;
}

// NOLINTNEXTLINE(readability-identifier-naming): the FM API names
__attribute__((visibility("default"))) abi::Return fmLibShutdown() {
  if (!g_initialized) return abi::kUninitialized;
  g_initialized = false;
  return abi::kSuccess;
}

// NOLINTNEXTLINE(readability-identifier-naming): the FM API names
__attribute__((visibility("default"))) abi::Return fmConnect(abi::ConnectParams* params,
                                                             abi::Handle* handle) {
  if (!g_initialized) return abi::kUninitialized;
  if (params == nullptr || handle == nullptr) return abi::kBadParam;
  if (params->version != abi::kConnectParamsVersion) return abi::kVersionMismatch;
  const std::string address(params->address_info,
                            strnlen(params->address_info, sizeof(params->address_info)));
  if (address.empty()) return abi::kBadParam;
  if (auto r = Injected("fmConnect")) return *r;
  if (!Partitions()) return abi::kNotConfigured;
  Log("fmConnect " + std::string(params->address_is_unix_socket ? "unix:" : "tcp:") + address);
  *handle = new int(0x6e76666d);
  return abi::kSuccess;
}

// NOLINTNEXTLINE(readability-identifier-naming): the FM API names
__attribute__((visibility("default"))) abi::Return fmDisconnect(abi::Handle handle) {
  if (!ValidHandle(handle)) return abi::kBadParam;
  delete static_cast<int*>(handle);
  return abi::kSuccess;
}

// NOLINTNEXTLINE(readability-identifier-naming): the FM API names
__attribute__((visibility("default"))) abi::Return fmGetSupportedFabricPartitions(
    abi::Handle handle, abi::PartitionList* list) {
  if (!ValidHandle(handle) || list == nullptr) return abi::kBadParam;
  if (list->version != abi::kPartitionListVersion) return abi::kVersionMismatch;
  if (auto r = Injected("fmGetSupportedFabricPartitions")) return *r;
  Locked lock;
  std::optional<std::vector<FakePartition>> parts = Partitions();
  if (!parts) return abi::kNotConfigured;
  const std::set<abi::PartitionId> active = Active();
  list->num_partitions = 0;
  list->max_num_partitions = abi::kMaxFabricPartitions;
  for (const FakePartition& p : *parts) {
    if (list->num_partitions == abi::kMaxFabricPartitions) break;
    abi::PartitionInfo& info = list->partition_info[list->num_partitions++];
    info.partition_id = p.id;
    info.is_active = active.contains(p.id) ? 1 : 0;
    info.num_gpus = 0;
    for (unsigned int g : p.gpus) {
      if (info.num_gpus == abi::kMaxNumGpus) break;
      abi::PartitionGpuInfo& gpu = info.gpu_info[info.num_gpus++];
      gpu.physical_id = g;
      gpu.uuid[0] = '\0';  // as on HGX systems: the module ID is what identifies a GPU
      gpu.pci_bus_id[0] = '\0';
      gpu.num_nvlinks_available = gpu.max_num_nvlinks = 18;
      gpu.nvlink_line_rate_mbps = 26562;
    }
  }
  Log("fmGetSupportedFabricPartitions");
  return abi::kSuccess;
}

namespace {

abi::Return SetActive(abi::Handle handle, abi::PartitionId id, bool activate) {
  if (!ValidHandle(handle)) return abi::kBadParam;
  const char* call = activate ? "fmActivateFabricPartition" : "fmDeactivateFabricPartition";
  if (auto r = Injected(call)) return *r;
  Locked lock;
  std::optional<std::vector<FakePartition>> parts = Partitions();
  if (!parts) return abi::kNotConfigured;
  const FakePartition* target = nullptr;
  for (const FakePartition& p : *parts) {
    if (p.id == id) target = &p;
  }
  if (target == nullptr) return abi::kBadParam;
  std::set<abi::PartitionId> active = Active();
  if (activate) {
    if (active.contains(id)) return abi::kInUse;
    const std::set<unsigned int> mine(target->gpus.begin(), target->gpus.end());
    for (const FakePartition& p : *parts) {
      if (!active.contains(p.id)) continue;
      for (unsigned int g : p.gpus) {
        if (mine.contains(g)) return abi::kInUse;
      }
    }
    active.insert(id);
  } else {
    if (!active.contains(id)) return abi::kNotConfigured;
    active.erase(id);
  }
  if (!SaveActive(active)) return abi::kGenericError;
  Log(std::string(call) + " " + std::to_string(id));
  return abi::kSuccess;
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the FM API names
__attribute__((visibility("default"))) abi::Return fmActivateFabricPartition(abi::Handle handle,
                                                                             abi::PartitionId id) {
  return SetActive(handle, id, true);
}

// NOLINTNEXTLINE(readability-identifier-naming): the FM API names
__attribute__((visibility("default"))) abi::Return fmDeactivateFabricPartition(
    abi::Handle handle, abi::PartitionId id) {
  return SetActive(handle, id, false);
}

}  // extern "C"
