#pragma once

// Functions the mock libnvidia-ml.so.1 exports beyond NVML. Real drivers lack them, so callers
// (the fake nvidia-smi, tests) look them up with dlsym and cope with their absence.
//
//   mockNvmlDeviceGetTimeslice(device, &value)   the `nvidia-smi compute-policy --set-timeslice`
//   mockNvmlDeviceSetTimeslice(device, value)    setting (0..3), persisted in state.json
//   mockNvmlInjectEvent(uuid, type, data, gi, ci)
//                                                queues an event (e.g. type 8 = XID, data = the
//                                                XID) for nvmlEventSetWait_v2 in every process
//   mockNvmlLastError()                          why the last call failed, e.g. "missing
//                                                <root>/dev/nvidiactl"; "" if nothing failed

#include "lib/nvml/nvml_abi.h"

namespace mock_nvml {

using MockNvmlDeviceGetTimesliceFn = dra::nvml::abi::Return(dra::nvml::abi::DeviceHandle,
                                                            unsigned int*);
using MockNvmlDeviceSetTimesliceFn = dra::nvml::abi::Return(dra::nvml::abi::DeviceHandle,
                                                            unsigned int);
using MockNvmlInjectEventFn = dra::nvml::abi::Return(const char* gpu_uuid, unsigned long long type,
                                                     unsigned long long data,
                                                     unsigned int gpu_instance_id,
                                                     unsigned int compute_instance_id);
using MockNvmlLastErrorFn = const char*();

}  // namespace mock_nvml
