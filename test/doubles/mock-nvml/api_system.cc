// Exported NVML entry points: library lifetime, error strings, system queries and device lookup.

#include <cstdio>
#include <type_traits>

#include "test/doubles/mock-nvml/context.h"
#include "test/doubles/mock-nvml/mig_logic.h"

using mock_nvml::abi::DeviceHandle;
using mock_nvml::abi::Return;
namespace abi = dra::nvml::abi;
namespace mn = mock_nvml;

namespace {

Return InitLocked(unsigned int flags) {
  mn::Context& ctx = mn::Context::Get();
  std::lock_guard<std::mutex> lock(ctx.mu());
  try {
    return ctx.Init(flags);
  } catch (const std::exception& e) {
    ctx.set_last_error(e.what());
    return abi::kErrorUnknown;
  }
}

Return GetCount(unsigned int* count) {
  return mn::Guarded("nvmlDeviceGetCount_v2", [&](mn::Context& ctx) {
    if (count == nullptr) return abi::kErrorInvalidArgument;
    *count = static_cast<unsigned int>(ctx.spec().gpus.size());
    return abi::kSuccess;
  });
}

Return GetHandleByIndex(unsigned int index, DeviceHandle* device) {
  return mn::Guarded("nvmlDeviceGetHandleByIndex_v2", [&](mn::Context& ctx) {
    if (device == nullptr || index >= ctx.spec().gpus.size()) return abi::kErrorInvalidArgument;
    *device = ctx.GpuHandle(index);
    return abi::kSuccess;
  });
}

Return GetHandleByPciBusId(const char* bus_id, DeviceHandle* device) {
  return mn::Guarded("nvmlDeviceGetHandleByPciBusId_v2", [&](mn::Context& ctx) {
    if (bus_id == nullptr || device == nullptr) return abi::kErrorInvalidArgument;
    unsigned int domain = 0, bus = 0, dev = 0, function = 0;
    // Accepts "0000:18:00.0" and "00000000:18:00.0", any case; also "18:00.0" (domain 0).
    if (std::sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &function) != 4) {
      domain = 0;
      if (std::sscanf(bus_id, "%x:%x.%x", &bus, &dev, &function) != 3) {
        return abi::kErrorInvalidArgument;
      }
    }
    const auto& gpus = ctx.spec().gpus;
    for (unsigned int i = 0; i < gpus.size(); ++i) {
      if (gpus[i].pci_domain == domain && gpus[i].pci_bus == bus && gpus[i].pci_device == dev &&
          function == 0) {
        *device = ctx.GpuHandle(i);
        return abi::kSuccess;
      }
    }
    return abi::kErrorNotFound;
  });
}

}  // namespace

MOCK_NVML_EXPORT Return nvmlInit_v2() { return InitLocked(0); }
MOCK_NVML_EXPORT Return nvmlInit() { return InitLocked(0); }
MOCK_NVML_EXPORT Return nvmlInitWithFlags(unsigned int flags) { return InitLocked(flags); }

MOCK_NVML_EXPORT Return nvmlShutdown() {
  mn::Context& ctx = mn::Context::Get();
  std::lock_guard<std::mutex> lock(ctx.mu());
  return ctx.Shutdown();
}

MOCK_NVML_EXPORT const char* nvmlErrorString(Return result) {
  switch (result) {
    case abi::kSuccess:
      return "Success";
    case abi::kErrorUninitialized:
      return "Uninitialized";
    case abi::kErrorInvalidArgument:
      return "Invalid Argument";
    case abi::kErrorNotSupported:
      return "Not Supported";
    case abi::kErrorNoPermission:
      return "Insufficient Permissions";
    case abi::kErrorAlreadyInitialized:
      return "Already Initialized";
    case abi::kErrorNotFound:
      return "Not Found";
    case abi::kErrorInsufficientSize:
      return "Insufficient Size";
    case abi::kErrorInsufficientPower:
      return "Insufficient External Power";
    case abi::kErrorDriverNotLoaded:
      return "Driver Not Loaded";
    case abi::kErrorTimeout:
      return "Timeout";
    case abi::kErrorIrqIssue:
      return "Interrupt request issue";
    case abi::kErrorLibraryNotFound:
      return "NVML Shared Library Not Found";
    case abi::kErrorFunctionNotFound:
      return "Function Not Found";
    case abi::kErrorCorruptedInforom:
      return "Corrupted infoROM";
    case abi::kErrorGpuIsLost:
      return "GPU is lost";
    case abi::kErrorResetRequired:
      return "GPU requires restart";
    case abi::kErrorOperatingSystem:
      return "The operating system has blocked the request.";
    case abi::kErrorLibRmVersionMismatch:
      return "RM has detected an NVML/RM version mismatch.";
    case abi::kErrorInUse:
      return "In use by another client";
    case abi::kErrorMemory:
      return "Insufficient Memory";
    case abi::kErrorNoData:
      return "No data";
    case abi::kErrorVgpuEccNotSupported:
      return "The requested vgpu operation is not available on target device, because ECC is "
             "enabled";
    case abi::kErrorInsufficientResources:
      return "Ran out of critical resources, other than memory";
    case abi::kErrorFreqNotSupported:
      return "The requested frequency is not supported";
    case abi::kErrorArgumentVersionMismatch:
      return "The provided version is invalid/unsupported";
    default:
      return "Unknown Error";
  }
}

MOCK_NVML_EXPORT Return nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return mn::Guarded("nvmlSystemGetDriverVersion", [&](mn::Context& ctx) {
    return mn::CopyString(ctx.spec().driver_version, version, length);
  });
}

MOCK_NVML_EXPORT Return nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return mn::Guarded("nvmlSystemGetNVMLVersion", [&](mn::Context& ctx) {
    return mn::CopyString(ctx.spec().nvml_version, version, length);
  });
}

MOCK_NVML_EXPORT Return nvmlSystemGetCudaDriverVersion_v2(int* version) {
  return mn::Guarded("nvmlSystemGetCudaDriverVersion_v2", [&](mn::Context& ctx) {
    if (version == nullptr) return abi::kErrorInvalidArgument;
    *version = ctx.spec().cuda_driver_version;
    return abi::kSuccess;
  });
}

MOCK_NVML_EXPORT Return nvmlSystemGetCudaDriverVersion(int* version) {
  return nvmlSystemGetCudaDriverVersion_v2(version);
}

MOCK_NVML_EXPORT Return nvmlDeviceGetCount_v2(unsigned int* count) { return GetCount(count); }
MOCK_NVML_EXPORT Return nvmlDeviceGetCount(unsigned int* count) { return GetCount(count); }

MOCK_NVML_EXPORT Return nvmlDeviceGetHandleByIndex_v2(unsigned int index, DeviceHandle* device) {
  return GetHandleByIndex(index, device);
}
MOCK_NVML_EXPORT Return nvmlDeviceGetHandleByIndex(unsigned int index, DeviceHandle* device) {
  return GetHandleByIndex(index, device);
}

// Accepts full GPU UUIDs and MIG device UUIDs, as real NVML does.
MOCK_NVML_EXPORT Return nvmlDeviceGetHandleByUUID(const char* uuid, DeviceHandle* device) {
  return mn::Guarded("nvmlDeviceGetHandleByUUID", [&](mn::Context& ctx) {
    if (uuid == nullptr || device == nullptr) return abi::kErrorInvalidArgument;
    const auto& gpus = ctx.spec().gpus;
    for (unsigned int i = 0; i < gpus.size(); ++i) {
      if (gpus[i].uuid == uuid) {
        // Finding a GPU by UUID reads its UUID, which a lost GPU cannot answer.
        if (Return forced = mn::GpuForcedError(ctx, i); forced != abi::kSuccess) return forced;
        *device = ctx.GpuHandle(i);
        return abi::kSuccess;
      }
    }
    mn::State state;
    if (Return ret = ctx.ReadState(&state); ret != abi::kSuccess) return ret;
    for (unsigned int i = 0; i < gpus.size(); ++i) {
      const mn::GpuState& gpu = state.gpus[gpus[i].uuid];
      for (const mn::MigDeviceRef& ref : mn::ListMigDevices(gpu)) {
        if (mn::FindCi(*mn::FindGi(gpu, ref.gi_id), ref.ci_id)->uuid == uuid) {
          *device = ctx.MigHandle(i, ref.gi_id, ref.ci_id);
          return abi::kSuccess;
        }
      }
    }
    return abi::kErrorNotFound;
  });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, DeviceHandle* device) {
  return GetHandleByPciBusId(bus_id, device);
}
MOCK_NVML_EXPORT Return nvmlDeviceGetHandleByPciBusId(const char* bus_id, DeviceHandle* device) {
  return GetHandleByPciBusId(bus_id, device);
}

static_assert(std::is_same_v<decltype(nvmlInit_v2), abi::InitV2Fn>);
static_assert(std::is_same_v<decltype(nvmlInitWithFlags), abi::InitWithFlagsFn>);
static_assert(std::is_same_v<decltype(nvmlShutdown), abi::ShutdownFn>);
static_assert(std::is_same_v<decltype(nvmlErrorString), abi::ErrorStringFn>);
static_assert(std::is_same_v<decltype(nvmlSystemGetDriverVersion), abi::SystemGetStringFn>);
static_assert(
    std::is_same_v<decltype(nvmlSystemGetCudaDriverVersion_v2), abi::SystemGetCudaDriverVersionFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetCount_v2), abi::DeviceGetCountFn>);
static_assert(
    std::is_same_v<decltype(nvmlDeviceGetHandleByIndex_v2), abi::DeviceGetHandleByIndexFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetHandleByUUID), abi::DeviceGetHandleByStringFn>);
