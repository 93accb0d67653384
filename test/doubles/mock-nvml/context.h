#pragma once

// Process-wide state of the mock library: the init reference count, the loaded profile, the state
// store and the handle registry. Every exported NVML function runs through Guarded(), which takes
// the one global mutex (NVML is thread-safe; the mock gets there by serializing), answers
// UNINITIALIZED before nvmlInit, applies forced errors and turns any C++ exception into
// NVML_ERROR_UNKNOWN so that none crosses the C ABI.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "lib/nvml/nvml_abi.h"
#include "test/doubles/mock-nvml/spec.h"
#include "test/doubles/mock-nvml/state.h"

namespace mock_nvml {

namespace abi = dra::nvml::abi;

// What an nvmlDevice_t points to: a full GPU (mig == false) or one MIG device (gi/ci set). Handle
// objects live until the library is unloaded, so stale handles stay dereferenceable; their
// identity is re-checked against the state on every use.
struct DeviceObject {
  unsigned int gpu = 0;  // NVML index
  bool mig = false;
  unsigned int gi = 0;
  unsigned int ci = 0;
};
struct GpuInstanceObject {
  unsigned int gpu = 0;
  unsigned int gi = 0;
};
struct ComputeInstanceObject {
  unsigned int gpu = 0;
  unsigned int gi = 0;
  unsigned int ci = 0;
};
struct EventSetObject {
  unsigned long long last_seq = 0;                        // events up to here are not delivered
  std::map<unsigned int, unsigned long long> registered;  // GPU index -> event type mask
};

class Context {
 public:
  static Context& Get();

  std::mutex& mu() { return mu_; }

  // REQUIRES: mu() held, for every member below.
  int Init(unsigned int flags);
  int Shutdown();
  bool initialized() const { return refcount_ > 0; }
  const NodeSpec& spec() const { return spec_; }
  const std::string& root() const { return root_; }
  const std::string& data_dir() const { return data_dir_; }
  int ForcedError(const std::string& function) const;
  // The NVML entry point being served (set by Guarded), for per-GPU forced errors.
  const std::string& function() const { return function_; }
  void set_function(const char* function) { function_ = function; }
  void set_last_error(const std::string& error) { last_error_ = error; }
  const std::string& last_error() const { return last_error_; }

  // Handle registry.
  abi::DeviceHandle GpuHandle(unsigned int gpu);
  abi::DeviceHandle MigHandle(unsigned int gpu, unsigned int gi, unsigned int ci);
  abi::GpuInstanceHandle GiHandle(unsigned int gpu, unsigned int gi);
  abi::ComputeInstanceHandle CiHandle(unsigned int gpu, unsigned int gi, unsigned int ci);
  abi::EventSetHandle NewEventSet();
  void FreeEventSet(abi::EventSetHandle set);
  // Null when the handle was not issued by this library (or names a GPU no longer in the profile).
  const DeviceObject* Device(abi::DeviceHandle h) const;
  const GpuInstanceObject* Gi(abi::GpuInstanceHandle h) const;
  const ComputeInstanceObject* Ci(abi::ComputeInstanceHandle h) const;
  EventSetObject* EventSet(abi::EventSetHandle h);

  // State access; see StateStore. Mutations also refresh the driver-root files (materialize.h).
  int ReadState(State* state);
  int MutateState(const std::function<int(State&)>& fn);

 private:
  Context() = default;

  std::mutex mu_;
  int refcount_ = 0;
  std::string root_;
  std::string data_dir_;
  NodeSpec spec_;
  std::unique_ptr<StateStore> store_;
  std::map<std::string, int> env_forced_errors_;
  std::string last_error_;
  std::string function_;

  std::vector<std::unique_ptr<DeviceObject>> gpu_handles_;
  std::map<std::tuple<unsigned int, unsigned int, unsigned int>, std::unique_ptr<DeviceObject>>
      mig_handles_;
  std::map<std::pair<unsigned int, unsigned int>, std::unique_ptr<GpuInstanceObject>> gi_handles_;
  std::map<std::tuple<unsigned int, unsigned int, unsigned int>,
           std::unique_ptr<ComputeInstanceObject>>
      ci_handles_;
  std::map<const void*, std::unique_ptr<EventSetObject>> event_sets_;
  enum class Kind { kDevice, kGpuInstance, kComputeInstance };
  std::map<const void*, Kind> issued_;  // every handle ever returned, by what it points to
};

// Runs `body` for the NVML entry point `function` with the global mutex held, after the init
// check and forced-error lookup.
int Guarded(const char* function, const std::function<int(Context&)>& body);

// Copies `value` into a caller buffer of `length` bytes: INSUFFICIENT_SIZE when it does not fit
// with its terminating NUL.
int CopyString(const std::string& value, char* out, unsigned int length);

// What a call of the current function on GPU `gpu` (an NVML index) is forced to return: the GPU's
// own forced error for it, else GPU_IS_LOST for a lost GPU, else SUCCESS.
int GpuForcedError(const Context& ctx, unsigned int gpu);

// Resolves a device handle (full GPU or MIG device) to its object and GPU spec; INVALID_ARGUMENT
// for handles this library did not issue, and the GPU's forced error (GpuForcedError).
int ResolveGpu(Context& ctx, abi::DeviceHandle h, const DeviceObject** obj, const GpuSpec** gpu);

// The persisted state of GPU `gpu` (an NVML index).
int ReadGpuState(Context& ctx, unsigned int gpu, GpuState* out);
// Read-modify-write of GPU `gpu`'s state; written back only when `fn` returns SUCCESS.
int MutateGpuState(Context& ctx, unsigned int gpu, const std::function<int(GpuState&)>& fn);

// Marks a function as exported with C linkage (the version script keeps only nvml* and mockNvml*).
#define MOCK_NVML_EXPORT extern "C" __attribute__((visibility("default")))

}  // namespace mock_nvml
