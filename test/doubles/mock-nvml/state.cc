#include "test/doubles/mock-nvml/state.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "lib/nvml/nvml_abi.h"
#include "nlohmann/json.hpp"
#include "test/doubles/mock-nvml/mig_logic.h"

namespace mock_nvml {
namespace {

namespace abi = dra::nvml::abi;
using nlohmann::json;

// Holds an flock on the lock file for its lifetime.
class FlockGuard {
 public:
  FlockGuard(const std::string& path, int operation) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      error_ = "open " + path + ": " + std::strerror(errno);
      return;
    }
    while (::flock(fd_, operation) != 0) {
      if (errno != EINTR) {
        error_ = "flock " + path + ": " + std::strerror(errno);
        return;
      }
    }
    locked_ = true;
  }
  ~FlockGuard() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  FlockGuard(const FlockGuard&) = delete;
  FlockGuard& operator=(const FlockGuard&) = delete;

  bool Locked() const { return locked_; }
  const std::string& Error() const { return error_; }

 private:
  int fd_ = -1;
  bool locked_ = false;
  std::string error_;
};

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

json EncodeGpu(const GpuState& g) {
  json gis = json::array();
  for (const GiState& gi : g.gis) {
    json cis = json::array();
    for (const CiState& ci : gi.cis) {
      cis.push_back({{"id", ci.id},
                     {"profile_index", ci.profile_index},
                     {"start", ci.start},
                     {"size", ci.size},
                     {"uuid", ci.uuid}});
    }
    gis.push_back({{"id", gi.id},
                   {"profile_index", gi.profile_index},
                   {"start", gi.start},
                   {"size", gi.size},
                   {"compute_instances", cis}});
  }
  return {{"mig_current", g.mig_current}, {"mig_pending", g.mig_pending},
          {"gpu_instances", gis},         {"compute_mode", g.compute_mode},
          {"persistence", g.persistence}, {"timeslice", g.timeslice},
          {"creations", g.creations}};
}

GpuState DecodeGpu(const json& j) {
  GpuState g;
  g.mig_current = j.at("mig_current").get<unsigned int>();
  g.mig_pending = j.at("mig_pending").get<unsigned int>();
  g.compute_mode = j.value("compute_mode", 0);
  g.persistence = j.value("persistence", true);
  g.timeslice = j.value("timeslice", 0u);
  g.creations = j.value("creations", 0ull);
  for (const json& gj : j.at("gpu_instances")) {
    GiState gi;
    gi.id = gj.at("id").get<unsigned int>();
    gi.profile_index = gj.at("profile_index").get<unsigned int>();
    gi.start = gj.at("start").get<unsigned int>();
    gi.size = gj.at("size").get<unsigned int>();
    for (const json& cj : gj.at("compute_instances")) {
      CiState ci;
      ci.id = cj.at("id").get<unsigned int>();
      ci.profile_index = cj.at("profile_index").get<unsigned int>();
      ci.start = cj.at("start").get<unsigned int>();
      ci.size = cj.at("size").get<unsigned int>();
      ci.uuid = cj.at("uuid").get<std::string>();
      gi.cis.push_back(ci);
    }
    g.gis.push_back(gi);
  }
  return g;
}

// The GPU's state before any NVML call: its profile's MIG mode and instances (each with a
// full-size compute instance). Returns false with `error` when an instance does not fit.
bool BuildInitialGpuState(const GpuSpec& spec, GpuState* out, std::string* error) {
  GpuState g;
  g.persistence = spec.initial_persistence;
  g.compute_mode = spec.initial_compute_mode;
  if (spec.mig_table) {
    g.mig_current = g.mig_pending =
        spec.initial_mig_enabled ? abi::kDeviceMigEnable : abi::kDeviceMigDisable;
  }
  for (size_t i = 0; i < spec.initial_instances.size(); ++i) {
    const InitialInstance& inst = spec.initial_instances[i];
    const GiProfile* profile = FindGiProfileByIndex(spec, inst.profile_index);
    unsigned int gi_id = 0, ci_id = 0;
    int ret = profile == nullptr || profile->compute_profiles.empty()
                  ? abi::kErrorInvalidArgument
                  : CreateGpuInstance(spec, g, profile->id, &inst.placement_start, &gi_id);
    if (ret == abi::kSuccess) {
      ret = CreateComputeInstance(spec, g, spec.uuid, gi_id, profile->compute_profiles.back().index,
                                  &ci_id);
    }
    if (ret != abi::kSuccess) {
      *error = "instance " + std::to_string(i) + " cannot be created (NVML error " +
               std::to_string(ret) +
               (g.mig_current == abi::kDeviceMigEnable ? ": placement taken or impossible)"
                                                       : ": MIG mode is disabled)");
      return false;
    }
  }
  *out = std::move(g);
  return true;
}

}  // namespace

State InitialState(const NodeSpec& spec) {
  State state;
  std::string ignored;  // ValidateInitialInstances already ran when the profile was parsed
  for (const GpuSpec& gpu : spec.gpus) BuildInitialGpuState(gpu, &state.gpus[gpu.uuid], &ignored);
  return state;
}

bool ValidateInitialInstances(const GpuSpec& gpu, std::string* error) {
  GpuState scratch;
  return BuildInitialGpuState(gpu, &scratch, error);
}

std::string EncodeState(const State& state) {
  json gpus = json::object();
  for (const auto& [uuid, gpu] : state.gpus) gpus[uuid] = EncodeGpu(gpu);
  json events = json::array();
  for (const InjectedEvent& e : state.events) {
    events.push_back({{"seq", e.seq},
                      {"gpu_uuid", e.gpu_uuid},
                      {"type", e.type},
                      {"data", e.data},
                      {"gpu_instance_id", e.gpu_instance_id},
                      {"compute_instance_id", e.compute_instance_id}});
  }
  return json{{"gpus", gpus}, {"events", events}}.dump(2) + "\n";
}

bool DecodeState(const std::string& text, State* state, std::string* error) {
  try {
    const json root = json::parse(text);
    State out;
    for (const auto& [uuid, gpu] : root.at("gpus").items()) out.gpus[uuid] = DecodeGpu(gpu);
    for (const json& e : root.value("events", json::array())) {
      InjectedEvent ev;
      ev.seq = e.at("seq").get<unsigned long long>();
      ev.gpu_uuid = e.at("gpu_uuid").get<std::string>();
      ev.type = e.value("type", 0x8ull);
      ev.data = e.value("data", 0ull);
      ev.gpu_instance_id = e.value("gpu_instance_id", 0xffffffffu);
      ev.compute_instance_id = e.value("compute_instance_id", 0xffffffffu);
      out.events.push_back(ev);
    }
    *state = std::move(out);
    return true;
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

int StateStore::LoadLocked(State* out, bool* existed, std::string* error) {
  std::ifstream in(state_path());
  State state;
  *existed = static_cast<bool>(in);
  if (!in) {
    state = InitialState(*spec_);
  } else {
    std::stringstream buffer;
    buffer << in.rdbuf();
    if (!DecodeState(buffer.str(), &state, error)) {
      *error = "corrupt " + state_path() + ": " + *error;
      return abi::kErrorUnknown;
    }
  }
  // GPUs added to the profile after the state was written start from their initial state.
  for (const GpuSpec& gpu : spec_->gpus) {
    if (state.gpus.find(gpu.uuid) == state.gpus.end()) {
      state.gpus[gpu.uuid] = InitialState(NodeSpec{"", 0, "", {gpu}, {}}).gpus[gpu.uuid];
    }
  }
  *out = std::move(state);
  return abi::kSuccess;
}

int StateStore::WriteLocked(const State& state, std::string* error) {
  const std::string path = state_path();
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = "create " + tmp + ": " + std::strerror(errno);
    return abi::kErrorNoPermission;
  }
  const bool ok = WriteAll(fd, EncodeState(state)) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = "write " + path + ": " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return abi::kErrorUnknown;
  }
  const int dir = ::open(data_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return abi::kSuccess;
}

int StateStore::Read(State* out, std::string* error) {
  // A read-only data directory (a container mount) may lack the lock file; the read then goes
  // unlocked, which is fine because writers replace state.json atomically.
  FlockGuard lock(lock_path(), LOCK_SH);
  bool existed = false;
  return LoadLocked(out, &existed, error);
}

int StateStore::Mutate(
    const std::function<int(State&)>& fn,
    const std::function<void(const State* before, const State& after)>& after_write,
    std::string* error) {
  FlockGuard lock(lock_path(), LOCK_EX);
  if (!lock.Locked()) {
    *error = lock.Error();
    return abi::kErrorNoPermission;
  }
  State state;
  bool existed = false;
  if (int ret = LoadLocked(&state, &existed, error); ret != abi::kSuccess) return ret;
  const State before = state;
  if (int ret = fn(state); ret != abi::kSuccess) return ret;
  if (int ret = WriteLocked(state, error); ret != abi::kSuccess) return ret;
  if (after_write) after_write(existed ? &before : nullptr, state);
  return abi::kSuccess;
}

}  // namespace mock_nvml
