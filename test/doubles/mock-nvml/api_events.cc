// Exported NVML event entry points, plus the mock-only event injection and error report. Events
// come from state.json (mockNvmlInjectEvent appends there), so a test process can inject an XID
// that the plugin process under test receives from nvmlEventSetWait_v2.

#include <chrono>
#include <thread>
#include <type_traits>

#include "test/doubles/mock-nvml/context.h"
#include "test/doubles/mock-nvml/mock_nvml_ext.h"

using mock_nvml::abi::DeviceHandle;
using mock_nvml::abi::EventSetHandle;
using mock_nvml::abi::Return;
namespace abi = dra::nvml::abi;
namespace mn = mock_nvml;

namespace {

constexpr unsigned long long kSupportedEvents =
    abi::kEventTypeSingleBitEccError | abi::kEventTypeDoubleBitEccError | abi::kEventTypePState |
    abi::kEventTypeXidCriticalError | abi::kEventTypeClock | abi::kEventMigConfigChange;
constexpr size_t kMaxKeptEvents = 256;

unsigned long long LastSeq(const mn::State& state) {
  return state.events.empty() ? 0 : state.events.back().seq;
}

// One poll: delivers the first undelivered event for a registered GPU, if any.
Return PollOnce(EventSetHandle set, abi::EventData* data, bool* delivered) {
  return mn::Guarded("nvmlEventSetWait_v2", [&](mn::Context& ctx) -> Return {
    mn::EventSetObject* obj = ctx.EventSet(set);
    if (obj == nullptr || data == nullptr) return abi::kErrorInvalidArgument;
    mn::State state;
    if (Return ret = ctx.ReadState(&state); ret != abi::kSuccess) return ret;
    const auto& gpus = ctx.spec().gpus;
    for (const mn::InjectedEvent& e : state.events) {
      if (e.seq <= obj->last_seq) continue;
      obj->last_seq = e.seq;
      for (unsigned int i = 0; i < gpus.size(); ++i) {
        auto it = obj->registered.find(i);
        if (gpus[i].uuid != e.gpu_uuid || it == obj->registered.end() ||
            (it->second & e.type) == 0) {
          continue;
        }
        *data = {ctx.GpuHandle(i), e.type, e.data, e.gpu_instance_id, e.compute_instance_id};
        *delivered = true;
        return abi::kSuccess;
      }
    }
    return abi::kSuccess;
  });
}

}  // namespace

MOCK_NVML_EXPORT Return nvmlEventSetCreate(EventSetHandle* set) {
  return mn::Guarded("nvmlEventSetCreate", [&](mn::Context& ctx) -> Return {
    if (set == nullptr) return abi::kErrorInvalidArgument;
    mn::State state;
    if (Return ret = ctx.ReadState(&state); ret != abi::kSuccess) return ret;
    *set = ctx.NewEventSet();
    ctx.EventSet(*set)->last_seq = LastSeq(state);
    return abi::kSuccess;
  });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetSupportedEventTypes(DeviceHandle device,
                                                         unsigned long long* types) {
  return mn::Guarded("nvmlDeviceGetSupportedEventTypes", [&](mn::Context& ctx) -> Return {
    const mn::DeviceObject* obj = ctx.Device(device);
    if (obj == nullptr || types == nullptr) return abi::kErrorInvalidArgument;
    if (Return forced = mn::GpuForcedError(ctx, obj->gpu); forced != abi::kSuccess) return forced;
    *types = kSupportedEvents;
    return abi::kSuccess;
  });
}

MOCK_NVML_EXPORT Return nvmlDeviceRegisterEvents(DeviceHandle device, unsigned long long types,
                                                 EventSetHandle set) {
  return mn::Guarded("nvmlDeviceRegisterEvents", [&](mn::Context& ctx) -> Return {
    const mn::DeviceObject* obj = ctx.Device(device);
    mn::EventSetObject* events = ctx.EventSet(set);
    if (obj == nullptr || events == nullptr || obj->mig) return abi::kErrorInvalidArgument;
    if (Return forced = mn::GpuForcedError(ctx, obj->gpu); forced != abi::kSuccess) return forced;
    if ((types & ~kSupportedEvents) != 0) return abi::kErrorNotSupported;
    events->registered[obj->gpu] |= types;
    return abi::kSuccess;
  });
}

// Polls state.json every 20 ms without holding the global mutex, so other threads' NVML calls
// proceed while one thread waits (the health monitor waits in a loop of 5 s timeouts).
MOCK_NVML_EXPORT Return nvmlEventSetWait_v2(EventSetHandle set, abi::EventData* data,
                                            unsigned int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    bool delivered = false;
    if (Return ret = PollOnce(set, data, &delivered); ret != abi::kSuccess || delivered) {
      return ret;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return abi::kErrorTimeout;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        deadline - now, std::chrono::milliseconds(20)));
  }
}

MOCK_NVML_EXPORT Return nvmlEventSetFree(EventSetHandle set) {
  return mn::Guarded("nvmlEventSetFree", [&](mn::Context& ctx) -> Return {
    if (ctx.EventSet(set) == nullptr) return abi::kErrorInvalidArgument;
    ctx.FreeEventSet(set);
    return abi::kSuccess;
  });
}

MOCK_NVML_EXPORT Return mockNvmlInjectEvent(const char* gpu_uuid, unsigned long long type,
                                            unsigned long long data, unsigned int gpu_instance_id,
                                            unsigned int compute_instance_id) {
  return mn::Guarded("mockNvmlInjectEvent", [&](mn::Context& ctx) -> Return {
    if (gpu_uuid == nullptr) return abi::kErrorInvalidArgument;
    return ctx.MutateState([&](mn::State& state) {
      mn::InjectedEvent e;
      e.seq = LastSeq(state) + 1;
      e.gpu_uuid = gpu_uuid;
      e.type = type;
      e.data = data;
      e.gpu_instance_id = gpu_instance_id;
      e.compute_instance_id = compute_instance_id;
      state.events.push_back(e);
      if (state.events.size() > kMaxKeptEvents) state.events.erase(state.events.begin());
      return abi::kSuccess;
    });
  });
}

// The returned text stays valid until the next NVML call on any thread.
MOCK_NVML_EXPORT const char* mockNvmlLastError() {
  mn::Context& ctx = mn::Context::Get();
  std::lock_guard<std::mutex> lock(ctx.mu());
  return ctx.last_error().c_str();
}

static_assert(std::is_same_v<decltype(nvmlEventSetCreate), abi::EventSetCreateFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetSupportedEventTypes),
                             abi::DeviceGetSupportedEventTypesFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceRegisterEvents), abi::DeviceRegisterEventsFn>);
static_assert(std::is_same_v<decltype(nvmlEventSetWait_v2), abi::EventSetWaitFn>);
static_assert(std::is_same_v<decltype(nvmlEventSetFree), abi::EventSetFreeFn>);
static_assert(std::is_same_v<decltype(mockNvmlInjectEvent), mn::MockNvmlInjectEventFn>);
static_assert(std::is_same_v<decltype(mockNvmlLastError), mn::MockNvmlLastErrorFn>);
