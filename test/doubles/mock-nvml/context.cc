#include "test/doubles/mock-nvml/context.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "test/doubles/mock-nvml/materialize.h"

namespace mock_nvml {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The file this library was loaded from, as the dynamic loader names it; empty if unknown.
std::string LibraryPath() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&LibraryPath), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  return info.dli_fname;
}

// The driver root this library serves: $MOCK_NVML_ROOT, else the directory the library was
// loaded from minus the library directory part (<root>/usr/lib/x86_64-linux-gnu -> <root>), the
// same directories the product searches (docs/compatibility.md "Driver root"). Inside a container
// this yields "/".
std::string DiscoverRoot() {
  if (const char* env = std::getenv("MOCK_NVML_ROOT"); env != nullptr && *env != '\0') {
    return env;
  }
  std::string dir = LibraryPath();
  if (dir.empty()) return "/";
  dir = dir.substr(0, dir.rfind('/'));
  if (char* real = ::realpath(dir.c_str(), nullptr)) {
    dir = real;
    std::free(real);
  }
  static constexpr const char* kLibDirs[] = {
      "/usr/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
      "/lib64",     "/lib/x86_64-linux-gnu",     "/lib/aarch64-linux-gnu"};
  for (const char* lib_dir : kLibDirs) {
    if (EndsWith(dir, lib_dir)) {
      std::string root = dir.substr(0, dir.size() - std::strlen(lib_dir));
      return root.empty() ? "/" : root;
    }
  }
  return dir.empty() ? "/" : dir;
}

std::string Join(const std::string& root, const std::string& path) {
  return root == "/" ? path : root + path;
}

// "nvmlDeviceGetMemoryInfo=3,nvmlInitWithFlags=9"
std::map<std::string, int> ParseForcedErrors(const char* text) {
  std::map<std::string, int> out;
  if (text == nullptr) return out;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) continue;
    out[item.substr(0, eq)] = std::atoi(item.c_str() + eq + 1);
  }
  return out;
}

}  // namespace

// LeakSanitizer's interface, present only in sanitizer builds of the host process.
extern "C" void __lsan_ignore_object(const void* p)  // NOLINT(bugprone-reserved-identifier)
    __attribute__((weak));

Context& Context::Get() {
  // Never destroyed: a thread may still call NVML while the process exits. Tests dlclose many
  // copies of this library, so tell LeakSanitizer (when present) that this is on purpose; what
  // the context owns is reachable from it and is not reported either.
  static Context* context = [] {
    auto* c = new Context();
    if (&__lsan_ignore_object != nullptr) __lsan_ignore_object(c);
    return c;
  }();
  return *context;
}

int Context::Init(unsigned int flags) {
  if (refcount_ > 0) {
    ++refcount_;
    return abi::kSuccess;
  }
  env_forced_errors_ = ParseForcedErrors(std::getenv("MOCK_NVML_FORCED_ERRORS"));
  root_ = DiscoverRoot();
  data_dir_ = Join(root_, "/var/lib/mock-nvml");
  NodeSpec spec;
  std::string error;
  // A container gets the driver's files only (CDI mounts), not <root>/var/lib/mock-nvml: there the
  // profile comes from the library file itself (spec.h, LoadEmbeddedNodeSpec). A root that has the
  // data folder is a host-side driver root and must hold profile.json.
  struct stat data_st;
  const bool host_root = ::stat(data_dir_.c_str(), &data_st) == 0;
  if (host_root ? !LoadNodeSpec(data_dir_ + "/profile.json", &spec, &error)
                : !LoadEmbeddedNodeSpec(LibraryPath(), &spec, &error)) {
    last_error_ = host_root ? error : "no " + data_dir_ + ", and " + error;
    return abi::kErrorDriverNotLoaded;
  }
  spec_ = std::move(spec);
  for (const auto& [name, code] : env_forced_errors_) spec_.forced_errors[name] = code;
  if (int forced = ForcedError(flags == 0 ? "nvmlInit_v2" : "nvmlInitWithFlags");
      forced != abi::kSuccess) {
    return forced;
  }
  // Like the real library: no control device, no driver.
  struct stat st;
  const std::string ctl = Join(root_, "/dev/nvidiactl");
  if (::stat(ctl.c_str(), &st) != 0) {
    last_error_ = "missing " + ctl;
    return abi::kErrorDriverNotLoaded;
  }
  if (spec_.gpus.empty() && (flags & abi::kInitFlagNoGpus) == 0) {
    last_error_ = "no GPUs in the profile and NVML_INIT_FLAG_NO_GPUS not given";
    return abi::kErrorNotFound;
  }
  store_ = std::make_unique<StateStore>(data_dir_, &spec_);
  refcount_ = 1;
  if (root_ != "/") {
    // Create state.json and the proc/dev files on first use of a driver root. Failure (say, a
    // read-only root) leaves NVML usable; the reason is kept for mockNvmlLastError().
    MutateState([](State&) { return abi::kSuccess; });
  }
  return abi::kSuccess;
}

int Context::Shutdown() {
  if (refcount_ == 0) return abi::kErrorUninitialized;
  --refcount_;
  return abi::kSuccess;
}

int Context::ForcedError(const std::string& function) const {
  auto it = spec_.forced_errors.find(function);
  return it == spec_.forced_errors.end() ? abi::kSuccess : it->second;
}

abi::DeviceHandle Context::GpuHandle(unsigned int gpu) {
  while (gpu_handles_.size() <= gpu) {
    gpu_handles_.push_back(std::make_unique<DeviceObject>());
    gpu_handles_.back()->gpu = static_cast<unsigned int>(gpu_handles_.size() - 1);
    issued_[gpu_handles_.back().get()] = Kind::kDevice;
  }
  return reinterpret_cast<abi::DeviceHandle>(gpu_handles_[gpu].get());
}

abi::DeviceHandle Context::MigHandle(unsigned int gpu, unsigned int gi, unsigned int ci) {
  auto& slot = mig_handles_[{gpu, gi, ci}];
  if (!slot) {
    slot = std::make_unique<DeviceObject>(DeviceObject{gpu, true, gi, ci});
    issued_[slot.get()] = Kind::kDevice;
  }
  return reinterpret_cast<abi::DeviceHandle>(slot.get());
}

abi::GpuInstanceHandle Context::GiHandle(unsigned int gpu, unsigned int gi) {
  auto& slot = gi_handles_[{gpu, gi}];
  if (!slot) {
    slot = std::make_unique<GpuInstanceObject>(GpuInstanceObject{gpu, gi});
    issued_[slot.get()] = Kind::kGpuInstance;
  }
  return reinterpret_cast<abi::GpuInstanceHandle>(slot.get());
}

abi::ComputeInstanceHandle Context::CiHandle(unsigned int gpu, unsigned int gi, unsigned int ci) {
  auto& slot = ci_handles_[{gpu, gi, ci}];
  if (!slot) {
    slot = std::make_unique<ComputeInstanceObject>(ComputeInstanceObject{gpu, gi, ci});
    issued_[slot.get()] = Kind::kComputeInstance;
  }
  return reinterpret_cast<abi::ComputeInstanceHandle>(slot.get());
}

abi::EventSetHandle Context::NewEventSet() {
  auto set = std::make_unique<EventSetObject>();
  const void* key = set.get();
  event_sets_[key] = std::move(set);
  return reinterpret_cast<abi::EventSetHandle>(const_cast<void*>(key));
}

void Context::FreeEventSet(abi::EventSetHandle set) { event_sets_.erase(set); }

const DeviceObject* Context::Device(abi::DeviceHandle h) const {
  auto it = issued_.find(h);
  if (it == issued_.end() || it->second != Kind::kDevice) return nullptr;
  const auto* obj = reinterpret_cast<const DeviceObject*>(h);
  return obj->gpu < spec_.gpus.size() ? obj : nullptr;
}

const GpuInstanceObject* Context::Gi(abi::GpuInstanceHandle h) const {
  auto it = issued_.find(h);
  if (it == issued_.end() || it->second != Kind::kGpuInstance) return nullptr;
  const auto* obj = reinterpret_cast<const GpuInstanceObject*>(h);
  return obj->gpu < spec_.gpus.size() ? obj : nullptr;
}

const ComputeInstanceObject* Context::Ci(abi::ComputeInstanceHandle h) const {
  auto it = issued_.find(h);
  if (it == issued_.end() || it->second != Kind::kComputeInstance) return nullptr;
  const auto* obj = reinterpret_cast<const ComputeInstanceObject*>(h);
  return obj->gpu < spec_.gpus.size() ? obj : nullptr;
}

EventSetObject* Context::EventSet(abi::EventSetHandle h) {
  auto it = event_sets_.find(h);
  return it == event_sets_.end() ? nullptr : it->second.get();
}

int Context::ReadState(State* state) {
  std::string error;
  const int ret = store_->Read(state, &error);
  if (ret != abi::kSuccess) last_error_ = error;
  return ret;
}

int Context::MutateState(const std::function<int(State&)>& fn) {
  std::string error;
  const int ret = store_->Mutate(
      fn,
      [this, &error](const State* before, const State& after) {
        MaterializeDriverFiles(root_, spec_, before, after, &error);
      },
      &error);
  if (!error.empty()) last_error_ = error;
  return ret;
}

int Guarded(const char* function, const std::function<int(Context&)>& body) {
  Context& ctx = Context::Get();
  std::lock_guard<std::mutex> lock(ctx.mu());
  if (!ctx.initialized()) return abi::kErrorUninitialized;
  ctx.set_function(function);
  if (int forced = ctx.ForcedError(function); forced != abi::kSuccess) return forced;
  try {
    return body(ctx);
  } catch (const std::exception& e) {
    ctx.set_last_error(std::string(function) + ": " + e.what());
    return abi::kErrorUnknown;
  }
}

int CopyString(const std::string& value, char* out, unsigned int length) {
  if (out == nullptr) return abi::kErrorInvalidArgument;
  if (value.size() + 1 > length) return abi::kErrorInsufficientSize;
  std::memcpy(out, value.c_str(), value.size() + 1);
  return abi::kSuccess;
}

int GpuForcedError(const Context& ctx, unsigned int gpu) {
  const GpuSpec& spec = ctx.spec().gpus[gpu];
  auto it = spec.forced_errors.find(ctx.function());
  if (it != spec.forced_errors.end()) return it->second;
  return spec.lost ? abi::kErrorGpuIsLost : abi::kSuccess;
}

int ResolveGpu(Context& ctx, abi::DeviceHandle h, const DeviceObject** obj, const GpuSpec** gpu) {
  const DeviceObject* o = ctx.Device(h);
  if (o == nullptr) return abi::kErrorInvalidArgument;
  if (int forced = GpuForcedError(ctx, o->gpu); forced != abi::kSuccess) return forced;
  *obj = o;
  *gpu = &ctx.spec().gpus[o->gpu];
  return abi::kSuccess;
}

int ReadGpuState(Context& ctx, unsigned int gpu, GpuState* out) {
  State state;
  if (int ret = ctx.ReadState(&state); ret != abi::kSuccess) return ret;
  *out = state.gpus[ctx.spec().gpus[gpu].uuid];
  return abi::kSuccess;
}

int MutateGpuState(Context& ctx, unsigned int gpu, const std::function<int(GpuState&)>& fn) {
  const std::string uuid = ctx.spec().gpus[gpu].uuid;
  return ctx.MutateState([&](State& state) { return fn(state.gpus[uuid]); });
}

}  // namespace mock_nvml
