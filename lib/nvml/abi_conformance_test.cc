// Checks our NVML declarations (nvml_abi.h) against NVIDIA's official nvml.h as shipped by Debian
// (libnvidia-ml-dev, CUDA 11.8): every struct both declare has the same size, alignment and field
// offsets, every constant both declare has the same value, and every function signature we use
// takes layout-compatible arguments. This is the only file that includes the official header.
//
// Not checked here because Debian's header predates them (verified by hand against R570 headers,
// see the static_asserts in nvml_abi.h): the fabric info structs and versions, the addressing mode
// struct, NVML_DEVICE_ARCH_BLACKWELL, the GPU instance profiles after 1_SLICE_REV1, the compute
// instance profile 1_SLICE_REV1, and the two profile counts (0x11 and 0x8 in current drivers, 0x8
// and 0x7 in the 11.8 header).
//
// The assertions are compile-time; the test cases exist so that ctest reports the check.

#include <nvml.h>

#include <cstddef>
#include <type_traits>

#include "gtest/gtest.h"
#include "lib/nvml/nvml_abi.h"

namespace {

namespace abi = dra::nvml::abi;

// Same size and alignment.
#define DRA_SAME_LAYOUT(ours, theirs)                        \
  static_assert(sizeof(abi::ours) == sizeof(theirs), #ours); \
  static_assert(alignof(abi::ours) == alignof(theirs), #ours)
// Same offset of a field.
#define DRA_SAME_OFFSET(ours, our_field, theirs, their_field)                    \
  static_assert(offsetof(abi::ours, our_field) == offsetof(theirs, their_field), \
                #ours "." #our_field)
// Same value of a constant (compared as unsigned long long so enums and macros mix).
#define DRA_SAME_VALUE(ours, theirs)                                                         \
  static_assert(                                                                             \
      static_cast<unsigned long long>(abi::ours) == static_cast<unsigned long long>(theirs), \
      #ours " == " #theirs)

DRA_SAME_LAYOUT(PciInfo, nvmlPciInfo_t);
DRA_SAME_OFFSET(PciInfo, bus_id_legacy, nvmlPciInfo_t, busIdLegacy);
DRA_SAME_OFFSET(PciInfo, domain, nvmlPciInfo_t, domain);
DRA_SAME_OFFSET(PciInfo, bus, nvmlPciInfo_t, bus);
DRA_SAME_OFFSET(PciInfo, device, nvmlPciInfo_t, device);
DRA_SAME_OFFSET(PciInfo, pci_device_id, nvmlPciInfo_t, pciDeviceId);
DRA_SAME_OFFSET(PciInfo, pci_subsystem_id, nvmlPciInfo_t, pciSubSystemId);
DRA_SAME_OFFSET(PciInfo, bus_id, nvmlPciInfo_t, busId);

DRA_SAME_LAYOUT(Memory, nvmlMemory_t);
DRA_SAME_OFFSET(Memory, total, nvmlMemory_t, total);
DRA_SAME_OFFSET(Memory, free, nvmlMemory_t, free);
DRA_SAME_OFFSET(Memory, used, nvmlMemory_t, used);

DRA_SAME_LAYOUT(MemoryV2, nvmlMemory_v2_t);
DRA_SAME_OFFSET(MemoryV2, version, nvmlMemory_v2_t, version);
DRA_SAME_OFFSET(MemoryV2, total, nvmlMemory_v2_t, total);
DRA_SAME_OFFSET(MemoryV2, reserved, nvmlMemory_v2_t, reserved);
DRA_SAME_OFFSET(MemoryV2, free, nvmlMemory_v2_t, free);
DRA_SAME_OFFSET(MemoryV2, used, nvmlMemory_v2_t, used);

DRA_SAME_LAYOUT(DeviceAttributes, nvmlDeviceAttributes_t);
DRA_SAME_OFFSET(DeviceAttributes, multiprocessor_count, nvmlDeviceAttributes_t,
                multiprocessorCount);
DRA_SAME_OFFSET(DeviceAttributes, shared_copy_engine_count, nvmlDeviceAttributes_t,
                sharedCopyEngineCount);
DRA_SAME_OFFSET(DeviceAttributes, shared_decoder_count, nvmlDeviceAttributes_t, sharedDecoderCount);
DRA_SAME_OFFSET(DeviceAttributes, shared_encoder_count, nvmlDeviceAttributes_t, sharedEncoderCount);
DRA_SAME_OFFSET(DeviceAttributes, shared_jpeg_count, nvmlDeviceAttributes_t, sharedJpegCount);
DRA_SAME_OFFSET(DeviceAttributes, shared_ofa_count, nvmlDeviceAttributes_t, sharedOfaCount);
DRA_SAME_OFFSET(DeviceAttributes, gpu_instance_slice_count, nvmlDeviceAttributes_t,
                gpuInstanceSliceCount);
DRA_SAME_OFFSET(DeviceAttributes, compute_instance_slice_count, nvmlDeviceAttributes_t,
                computeInstanceSliceCount);
DRA_SAME_OFFSET(DeviceAttributes, memory_size_mb, nvmlDeviceAttributes_t, memorySizeMB);

DRA_SAME_LAYOUT(GpuInstancePlacement, nvmlGpuInstancePlacement_t);
DRA_SAME_OFFSET(GpuInstancePlacement, start, nvmlGpuInstancePlacement_t, start);
DRA_SAME_OFFSET(GpuInstancePlacement, size, nvmlGpuInstancePlacement_t, size);

DRA_SAME_LAYOUT(GpuInstanceProfileInfo, nvmlGpuInstanceProfileInfo_t);
DRA_SAME_OFFSET(GpuInstanceProfileInfo, id, nvmlGpuInstanceProfileInfo_t, id);
DRA_SAME_OFFSET(GpuInstanceProfileInfo, is_p2p_supported, nvmlGpuInstanceProfileInfo_t,
                isP2pSupported);
DRA_SAME_OFFSET(GpuInstanceProfileInfo, slice_count, nvmlGpuInstanceProfileInfo_t, sliceCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfo, instance_count, nvmlGpuInstanceProfileInfo_t,
                instanceCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfo, multiprocessor_count, nvmlGpuInstanceProfileInfo_t,
                multiprocessorCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfo, copy_engine_count, nvmlGpuInstanceProfileInfo_t,
                copyEngineCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfo, decoder_count, nvmlGpuInstanceProfileInfo_t, decoderCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfo, encoder_count, nvmlGpuInstanceProfileInfo_t, encoderCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfo, jpeg_count, nvmlGpuInstanceProfileInfo_t, jpegCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfo, ofa_count, nvmlGpuInstanceProfileInfo_t, ofaCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfo, memory_size_mb, nvmlGpuInstanceProfileInfo_t, memorySizeMB);

DRA_SAME_LAYOUT(GpuInstanceProfileInfoV2, nvmlGpuInstanceProfileInfo_v2_t);
DRA_SAME_OFFSET(GpuInstanceProfileInfoV2, version, nvmlGpuInstanceProfileInfo_v2_t, version);
DRA_SAME_OFFSET(GpuInstanceProfileInfoV2, id, nvmlGpuInstanceProfileInfo_v2_t, id);
DRA_SAME_OFFSET(GpuInstanceProfileInfoV2, is_p2p_supported, nvmlGpuInstanceProfileInfo_v2_t,
                isP2pSupported);
DRA_SAME_OFFSET(GpuInstanceProfileInfoV2, slice_count, nvmlGpuInstanceProfileInfo_v2_t, sliceCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfoV2, instance_count, nvmlGpuInstanceProfileInfo_v2_t,
                instanceCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfoV2, multiprocessor_count, nvmlGpuInstanceProfileInfo_v2_t,
                multiprocessorCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfoV2, copy_engine_count, nvmlGpuInstanceProfileInfo_v2_t,
                copyEngineCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfoV2, decoder_count, nvmlGpuInstanceProfileInfo_v2_t,
                decoderCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfoV2, encoder_count, nvmlGpuInstanceProfileInfo_v2_t,
                encoderCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfoV2, jpeg_count, nvmlGpuInstanceProfileInfo_v2_t, jpegCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfoV2, ofa_count, nvmlGpuInstanceProfileInfo_v2_t, ofaCount);
DRA_SAME_OFFSET(GpuInstanceProfileInfoV2, memory_size_mb, nvmlGpuInstanceProfileInfo_v2_t,
                memorySizeMB);
DRA_SAME_OFFSET(GpuInstanceProfileInfoV2, name, nvmlGpuInstanceProfileInfo_v2_t, name);

DRA_SAME_LAYOUT(GpuInstanceInfo, nvmlGpuInstanceInfo_t);
DRA_SAME_OFFSET(GpuInstanceInfo, device, nvmlGpuInstanceInfo_t, device);
DRA_SAME_OFFSET(GpuInstanceInfo, id, nvmlGpuInstanceInfo_t, id);
DRA_SAME_OFFSET(GpuInstanceInfo, profile_id, nvmlGpuInstanceInfo_t, profileId);
DRA_SAME_OFFSET(GpuInstanceInfo, placement, nvmlGpuInstanceInfo_t, placement);

DRA_SAME_LAYOUT(ComputeInstancePlacement, nvmlComputeInstancePlacement_t);
DRA_SAME_OFFSET(ComputeInstancePlacement, start, nvmlComputeInstancePlacement_t, start);
DRA_SAME_OFFSET(ComputeInstancePlacement, size, nvmlComputeInstancePlacement_t, size);

DRA_SAME_LAYOUT(ComputeInstanceProfileInfo, nvmlComputeInstanceProfileInfo_t);
DRA_SAME_OFFSET(ComputeInstanceProfileInfo, id, nvmlComputeInstanceProfileInfo_t, id);
DRA_SAME_OFFSET(ComputeInstanceProfileInfo, slice_count, nvmlComputeInstanceProfileInfo_t,
                sliceCount);
DRA_SAME_OFFSET(ComputeInstanceProfileInfo, instance_count, nvmlComputeInstanceProfileInfo_t,
                instanceCount);
DRA_SAME_OFFSET(ComputeInstanceProfileInfo, multiprocessor_count, nvmlComputeInstanceProfileInfo_t,
                multiprocessorCount);
DRA_SAME_OFFSET(ComputeInstanceProfileInfo, shared_copy_engine_count,
                nvmlComputeInstanceProfileInfo_t, sharedCopyEngineCount);
DRA_SAME_OFFSET(ComputeInstanceProfileInfo, shared_decoder_count, nvmlComputeInstanceProfileInfo_t,
                sharedDecoderCount);
DRA_SAME_OFFSET(ComputeInstanceProfileInfo, shared_encoder_count, nvmlComputeInstanceProfileInfo_t,
                sharedEncoderCount);
DRA_SAME_OFFSET(ComputeInstanceProfileInfo, shared_jpeg_count, nvmlComputeInstanceProfileInfo_t,
                sharedJpegCount);
DRA_SAME_OFFSET(ComputeInstanceProfileInfo, shared_ofa_count, nvmlComputeInstanceProfileInfo_t,
                sharedOfaCount);

DRA_SAME_LAYOUT(ComputeInstanceProfileInfoV2, nvmlComputeInstanceProfileInfo_v2_t);
DRA_SAME_OFFSET(ComputeInstanceProfileInfoV2, version, nvmlComputeInstanceProfileInfo_v2_t,
                version);
DRA_SAME_OFFSET(ComputeInstanceProfileInfoV2, id, nvmlComputeInstanceProfileInfo_v2_t, id);
DRA_SAME_OFFSET(ComputeInstanceProfileInfoV2, slice_count, nvmlComputeInstanceProfileInfo_v2_t,
                sliceCount);
DRA_SAME_OFFSET(ComputeInstanceProfileInfoV2, instance_count, nvmlComputeInstanceProfileInfo_v2_t,
                instanceCount);
DRA_SAME_OFFSET(ComputeInstanceProfileInfoV2, multiprocessor_count,
                nvmlComputeInstanceProfileInfo_v2_t, multiprocessorCount);
DRA_SAME_OFFSET(ComputeInstanceProfileInfoV2, shared_copy_engine_count,
                nvmlComputeInstanceProfileInfo_v2_t, sharedCopyEngineCount);
DRA_SAME_OFFSET(ComputeInstanceProfileInfoV2, shared_decoder_count,
                nvmlComputeInstanceProfileInfo_v2_t, sharedDecoderCount);
DRA_SAME_OFFSET(ComputeInstanceProfileInfoV2, shared_encoder_count,
                nvmlComputeInstanceProfileInfo_v2_t, sharedEncoderCount);
DRA_SAME_OFFSET(ComputeInstanceProfileInfoV2, shared_jpeg_count,
                nvmlComputeInstanceProfileInfo_v2_t, sharedJpegCount);
DRA_SAME_OFFSET(ComputeInstanceProfileInfoV2, shared_ofa_count, nvmlComputeInstanceProfileInfo_v2_t,
                sharedOfaCount);
DRA_SAME_OFFSET(ComputeInstanceProfileInfoV2, name, nvmlComputeInstanceProfileInfo_v2_t, name);

DRA_SAME_LAYOUT(ComputeInstanceInfo, nvmlComputeInstanceInfo_t);
DRA_SAME_OFFSET(ComputeInstanceInfo, device, nvmlComputeInstanceInfo_t, device);
DRA_SAME_OFFSET(ComputeInstanceInfo, gpu_instance, nvmlComputeInstanceInfo_t, gpuInstance);
DRA_SAME_OFFSET(ComputeInstanceInfo, id, nvmlComputeInstanceInfo_t, id);
DRA_SAME_OFFSET(ComputeInstanceInfo, profile_id, nvmlComputeInstanceInfo_t, profileId);
DRA_SAME_OFFSET(ComputeInstanceInfo, placement, nvmlComputeInstanceInfo_t, placement);

DRA_SAME_LAYOUT(EventData, nvmlEventData_t);
DRA_SAME_OFFSET(EventData, device, nvmlEventData_t, device);
DRA_SAME_OFFSET(EventData, event_type, nvmlEventData_t, eventType);
DRA_SAME_OFFSET(EventData, event_data, nvmlEventData_t, eventData);
DRA_SAME_OFFSET(EventData, gpu_instance_id, nvmlEventData_t, gpuInstanceId);
DRA_SAME_OFFSET(EventData, compute_instance_id, nvmlEventData_t, computeInstanceId);

// Handles are pointers; enums are int-sized. (Pointer sizes are the point here.)
// NOLINTBEGIN(bugprone-sizeof-expression)
static_assert(sizeof(abi::DeviceHandle) == sizeof(nvmlDevice_t));
static_assert(sizeof(abi::GpuInstanceHandle) == sizeof(nvmlGpuInstance_t));
static_assert(sizeof(abi::ComputeInstanceHandle) == sizeof(nvmlComputeInstance_t));
static_assert(sizeof(abi::EventSetHandle) == sizeof(nvmlEventSet_t));
// NOLINTEND(bugprone-sizeof-expression)
static_assert(sizeof(int) == sizeof(nvmlReturn_t));
static_assert(sizeof(int) == sizeof(nvmlBrandType_t));
static_assert(sizeof(int) == sizeof(nvmlComputeMode_t));
static_assert(sizeof(int) == sizeof(nvmlEnableState_t));
static_assert(sizeof(int) == sizeof(nvmlGpuVirtualizationMode_t));
static_assert(std::is_same_v<unsigned int, nvmlDeviceArchitecture_t>);

DRA_SAME_VALUE(kSuccess, NVML_SUCCESS);
DRA_SAME_VALUE(kErrorUninitialized, NVML_ERROR_UNINITIALIZED);
DRA_SAME_VALUE(kErrorInvalidArgument, NVML_ERROR_INVALID_ARGUMENT);
DRA_SAME_VALUE(kErrorNotSupported, NVML_ERROR_NOT_SUPPORTED);
DRA_SAME_VALUE(kErrorNoPermission, NVML_ERROR_NO_PERMISSION);
DRA_SAME_VALUE(kErrorAlreadyInitialized, NVML_ERROR_ALREADY_INITIALIZED);
DRA_SAME_VALUE(kErrorNotFound, NVML_ERROR_NOT_FOUND);
DRA_SAME_VALUE(kErrorInsufficientSize, NVML_ERROR_INSUFFICIENT_SIZE);
DRA_SAME_VALUE(kErrorInsufficientPower, NVML_ERROR_INSUFFICIENT_POWER);
DRA_SAME_VALUE(kErrorDriverNotLoaded, NVML_ERROR_DRIVER_NOT_LOADED);
DRA_SAME_VALUE(kErrorTimeout, NVML_ERROR_TIMEOUT);
DRA_SAME_VALUE(kErrorIrqIssue, NVML_ERROR_IRQ_ISSUE);
DRA_SAME_VALUE(kErrorLibraryNotFound, NVML_ERROR_LIBRARY_NOT_FOUND);
DRA_SAME_VALUE(kErrorFunctionNotFound, NVML_ERROR_FUNCTION_NOT_FOUND);
DRA_SAME_VALUE(kErrorCorruptedInforom, NVML_ERROR_CORRUPTED_INFOROM);
DRA_SAME_VALUE(kErrorGpuIsLost, NVML_ERROR_GPU_IS_LOST);
DRA_SAME_VALUE(kErrorResetRequired, NVML_ERROR_RESET_REQUIRED);
DRA_SAME_VALUE(kErrorOperatingSystem, NVML_ERROR_OPERATING_SYSTEM);
DRA_SAME_VALUE(kErrorLibRmVersionMismatch, NVML_ERROR_LIB_RM_VERSION_MISMATCH);
DRA_SAME_VALUE(kErrorInUse, NVML_ERROR_IN_USE);
DRA_SAME_VALUE(kErrorMemory, NVML_ERROR_MEMORY);
DRA_SAME_VALUE(kErrorNoData, NVML_ERROR_NO_DATA);
DRA_SAME_VALUE(kErrorVgpuEccNotSupported, NVML_ERROR_VGPU_ECC_NOT_SUPPORTED);
DRA_SAME_VALUE(kErrorInsufficientResources, NVML_ERROR_INSUFFICIENT_RESOURCES);
DRA_SAME_VALUE(kErrorFreqNotSupported, NVML_ERROR_FREQ_NOT_SUPPORTED);
DRA_SAME_VALUE(kErrorArgumentVersionMismatch, NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
DRA_SAME_VALUE(kErrorUnknown, NVML_ERROR_UNKNOWN);
DRA_SAME_VALUE(kDevicePciBusIdBufferSize, NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE);
DRA_SAME_VALUE(kDevicePciBusIdBufferV2Size, NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE);
DRA_SAME_VALUE(kDeviceUuidBufferSize, NVML_DEVICE_UUID_BUFFER_SIZE);
DRA_SAME_VALUE(kDeviceUuidV2BufferSize, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
DRA_SAME_VALUE(kDeviceNameBufferSize, NVML_DEVICE_NAME_BUFFER_SIZE);
DRA_SAME_VALUE(kDeviceNameV2BufferSize, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
DRA_SAME_VALUE(kSystemDriverVersionBufferSize, NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
DRA_SAME_VALUE(kSystemNvmlVersionBufferSize, NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE);
DRA_SAME_VALUE(kInitFlagNoGpus, NVML_INIT_FLAG_NO_GPUS);
DRA_SAME_VALUE(kInitFlagNoAttach, NVML_INIT_FLAG_NO_ATTACH);
DRA_SAME_VALUE(kFeatureDisabled, NVML_FEATURE_DISABLED);
DRA_SAME_VALUE(kFeatureEnabled, NVML_FEATURE_ENABLED);
DRA_SAME_VALUE(kBrandUnknown, NVML_BRAND_UNKNOWN);
DRA_SAME_VALUE(kBrandQuadro, NVML_BRAND_QUADRO);
DRA_SAME_VALUE(kBrandTesla, NVML_BRAND_TESLA);
DRA_SAME_VALUE(kBrandNvs, NVML_BRAND_NVS);
DRA_SAME_VALUE(kBrandGrid, NVML_BRAND_GRID);
DRA_SAME_VALUE(kBrandGeforce, NVML_BRAND_GEFORCE);
DRA_SAME_VALUE(kBrandTitan, NVML_BRAND_TITAN);
DRA_SAME_VALUE(kBrandNvidiaVapps, NVML_BRAND_NVIDIA_VAPPS);
DRA_SAME_VALUE(kBrandNvidiaVpc, NVML_BRAND_NVIDIA_VPC);
DRA_SAME_VALUE(kBrandNvidiaVcs, NVML_BRAND_NVIDIA_VCS);
DRA_SAME_VALUE(kBrandNvidiaVws, NVML_BRAND_NVIDIA_VWS);
DRA_SAME_VALUE(kBrandNvidiaCloudGaming, NVML_BRAND_NVIDIA_CLOUD_GAMING);
DRA_SAME_VALUE(kBrandQuadroRtx, NVML_BRAND_QUADRO_RTX);
DRA_SAME_VALUE(kBrandNvidiaRtx, NVML_BRAND_NVIDIA_RTX);
DRA_SAME_VALUE(kBrandNvidia, NVML_BRAND_NVIDIA);
DRA_SAME_VALUE(kBrandGeforceRtx, NVML_BRAND_GEFORCE_RTX);
DRA_SAME_VALUE(kBrandTitanRtx, NVML_BRAND_TITAN_RTX);
DRA_SAME_VALUE(kComputeModeDefault, NVML_COMPUTEMODE_DEFAULT);
DRA_SAME_VALUE(kComputeModeExclusiveThread, NVML_COMPUTEMODE_EXCLUSIVE_THREAD);
DRA_SAME_VALUE(kComputeModeProhibited, NVML_COMPUTEMODE_PROHIBITED);
DRA_SAME_VALUE(kComputeModeExclusiveProcess, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS);
DRA_SAME_VALUE(kArchKepler, NVML_DEVICE_ARCH_KEPLER);
DRA_SAME_VALUE(kArchMaxwell, NVML_DEVICE_ARCH_MAXWELL);
DRA_SAME_VALUE(kArchPascal, NVML_DEVICE_ARCH_PASCAL);
DRA_SAME_VALUE(kArchVolta, NVML_DEVICE_ARCH_VOLTA);
DRA_SAME_VALUE(kArchTuring, NVML_DEVICE_ARCH_TURING);
DRA_SAME_VALUE(kArchAmpere, NVML_DEVICE_ARCH_AMPERE);
DRA_SAME_VALUE(kArchAda, NVML_DEVICE_ARCH_ADA);
DRA_SAME_VALUE(kArchHopper, NVML_DEVICE_ARCH_HOPPER);
DRA_SAME_VALUE(kArchUnknown, NVML_DEVICE_ARCH_UNKNOWN);
DRA_SAME_VALUE(kVirtualizationModeNone, NVML_GPU_VIRTUALIZATION_MODE_NONE);
DRA_SAME_VALUE(kVirtualizationModePassthrough, NVML_GPU_VIRTUALIZATION_MODE_PASSTHROUGH);
DRA_SAME_VALUE(kVirtualizationModeVgpu, NVML_GPU_VIRTUALIZATION_MODE_VGPU);
DRA_SAME_VALUE(kVirtualizationModeHostVgpu, NVML_GPU_VIRTUALIZATION_MODE_HOST_VGPU);
DRA_SAME_VALUE(kVirtualizationModeHostVsga, NVML_GPU_VIRTUALIZATION_MODE_HOST_VSGA);
DRA_SAME_VALUE(kMemoryV2Version, nvmlMemory_v2);
DRA_SAME_VALUE(kGpuInstanceProfileInfoV2Version, nvmlGpuInstanceProfileInfo_v2);
DRA_SAME_VALUE(kComputeInstanceProfileInfoV2Version, nvmlComputeInstanceProfileInfo_v2);
DRA_SAME_VALUE(kDeviceMigDisable, NVML_DEVICE_MIG_DISABLE);
DRA_SAME_VALUE(kDeviceMigEnable, NVML_DEVICE_MIG_ENABLE);
DRA_SAME_VALUE(kGpuInstanceProfile1Slice, NVML_GPU_INSTANCE_PROFILE_1_SLICE);
DRA_SAME_VALUE(kGpuInstanceProfile2Slice, NVML_GPU_INSTANCE_PROFILE_2_SLICE);
DRA_SAME_VALUE(kGpuInstanceProfile3Slice, NVML_GPU_INSTANCE_PROFILE_3_SLICE);
DRA_SAME_VALUE(kGpuInstanceProfile4Slice, NVML_GPU_INSTANCE_PROFILE_4_SLICE);
DRA_SAME_VALUE(kGpuInstanceProfile7Slice, NVML_GPU_INSTANCE_PROFILE_7_SLICE);
DRA_SAME_VALUE(kGpuInstanceProfile8Slice, NVML_GPU_INSTANCE_PROFILE_8_SLICE);
DRA_SAME_VALUE(kGpuInstanceProfile6Slice, NVML_GPU_INSTANCE_PROFILE_6_SLICE);
DRA_SAME_VALUE(kGpuInstanceProfile1SliceRev1, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1);
DRA_SAME_VALUE(kComputeInstanceProfile1Slice, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE);
DRA_SAME_VALUE(kComputeInstanceProfile2Slice, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE);
DRA_SAME_VALUE(kComputeInstanceProfile3Slice, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE);
DRA_SAME_VALUE(kComputeInstanceProfile4Slice, NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE);
DRA_SAME_VALUE(kComputeInstanceProfile7Slice, NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE);
DRA_SAME_VALUE(kComputeInstanceProfile8Slice, NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE);
DRA_SAME_VALUE(kComputeInstanceProfile6Slice, NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE);
DRA_SAME_VALUE(kComputeInstanceEngineProfileShared, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED);
DRA_SAME_VALUE(kComputeInstanceEngineProfileCount, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT);
DRA_SAME_VALUE(kEventTypeSingleBitEccError, nvmlEventTypeSingleBitEccError);
DRA_SAME_VALUE(kEventTypeDoubleBitEccError, nvmlEventTypeDoubleBitEccError);
DRA_SAME_VALUE(kEventTypePState, nvmlEventTypePState);
DRA_SAME_VALUE(kEventTypeXidCriticalError, nvmlEventTypeXidCriticalError);
DRA_SAME_VALUE(kEventTypeClock, nvmlEventTypeClock);
DRA_SAME_VALUE(kEventTypePowerSourceChange, nvmlEventTypePowerSourceChange);
DRA_SAME_VALUE(kEventMigConfigChange, nvmlEventMigConfigChange);
DRA_SAME_VALUE(kEventTypeNone, nvmlEventTypeNone);

// Same arity, and each parameter (and the result) of the same size and pointer-ness: enough for
// the calling convention to pass the same bits.
// NOLINTBEGIN(bugprone-sizeof-expression): parameters are often pointers; their size is the point
template <typename RA, typename... PA, typename RB, typename... PB>
constexpr bool SameCallAbi(RA (*)(PA...), RB (*)(PB...)) {
  if constexpr (sizeof...(PA) != sizeof...(PB)) {
    return false;
  } else {
    return sizeof(RA) == sizeof(RB) && std::is_pointer_v<RA> == std::is_pointer_v<RB> &&
           ((sizeof(PA) == sizeof(PB) && std::is_pointer_v<PA> == std::is_pointer_v<PB>)&&...);
  }
}
// NOLINTEND(bugprone-sizeof-expression)
#define DRA_SAME_SIGNATURE(ours, theirs) \
  static_assert(SameCallAbi(static_cast<abi::ours*>(nullptr), &::theirs), #theirs)

DRA_SAME_SIGNATURE(InitV2Fn, nvmlInit_v2);
DRA_SAME_SIGNATURE(InitWithFlagsFn, nvmlInitWithFlags);
DRA_SAME_SIGNATURE(ShutdownFn, nvmlShutdown);
DRA_SAME_SIGNATURE(ErrorStringFn, nvmlErrorString);
DRA_SAME_SIGNATURE(SystemGetStringFn, nvmlSystemGetDriverVersion);
DRA_SAME_SIGNATURE(SystemGetStringFn, nvmlSystemGetNVMLVersion);
DRA_SAME_SIGNATURE(SystemGetCudaDriverVersionFn, nvmlSystemGetCudaDriverVersion_v2);
DRA_SAME_SIGNATURE(DeviceGetCountFn, nvmlDeviceGetCount_v2);
DRA_SAME_SIGNATURE(DeviceGetHandleByIndexFn, nvmlDeviceGetHandleByIndex_v2);
DRA_SAME_SIGNATURE(DeviceGetHandleByStringFn, nvmlDeviceGetHandleByUUID);
DRA_SAME_SIGNATURE(DeviceGetHandleByStringFn, nvmlDeviceGetHandleByPciBusId_v2);
DRA_SAME_SIGNATURE(DeviceGetStringFn, nvmlDeviceGetName);
DRA_SAME_SIGNATURE(DeviceGetStringFn, nvmlDeviceGetUUID);
DRA_SAME_SIGNATURE(DeviceGetUintFn, nvmlDeviceGetMinorNumber);
DRA_SAME_SIGNATURE(DeviceGetUintFn, nvmlDeviceGetIndex);
DRA_SAME_SIGNATURE(DeviceGetUintFn, nvmlDeviceGetArchitecture);
DRA_SAME_SIGNATURE(DeviceGetIntFn, nvmlDeviceGetBrand);
DRA_SAME_SIGNATURE(DeviceGetIntFn, nvmlDeviceGetVirtualizationMode);
DRA_SAME_SIGNATURE(DeviceGetIntFn, nvmlDeviceGetPersistenceMode);
DRA_SAME_SIGNATURE(DeviceSetIntFn, nvmlDeviceSetPersistenceMode);
DRA_SAME_SIGNATURE(DeviceGetIntFn, nvmlDeviceGetComputeMode);
DRA_SAME_SIGNATURE(DeviceSetIntFn, nvmlDeviceSetComputeMode);
DRA_SAME_SIGNATURE(DeviceGetPciInfoFn, nvmlDeviceGetPciInfo_v3);
DRA_SAME_SIGNATURE(DeviceGetMemoryInfoFn, nvmlDeviceGetMemoryInfo);
DRA_SAME_SIGNATURE(DeviceGetMemoryInfoV2Fn, nvmlDeviceGetMemoryInfo_v2);
DRA_SAME_SIGNATURE(DeviceGetCudaComputeCapabilityFn, nvmlDeviceGetCudaComputeCapability);
DRA_SAME_SIGNATURE(DeviceGetAttributesFn, nvmlDeviceGetAttributes_v2);
DRA_SAME_SIGNATURE(DeviceGetUintFn, nvmlDeviceIsMigDeviceHandle);
DRA_SAME_SIGNATURE(DeviceGetMigModeFn, nvmlDeviceGetMigMode);
DRA_SAME_SIGNATURE(DeviceSetMigModeFn, nvmlDeviceSetMigMode);
DRA_SAME_SIGNATURE(DeviceGetGpuInstanceProfileInfoFn, nvmlDeviceGetGpuInstanceProfileInfo);
DRA_SAME_SIGNATURE(DeviceGetGpuInstanceProfileInfoVFn, nvmlDeviceGetGpuInstanceProfileInfoV);
DRA_SAME_SIGNATURE(DeviceGetGpuInstancePossiblePlacementsFn,
                   nvmlDeviceGetGpuInstancePossiblePlacements_v2);
DRA_SAME_SIGNATURE(DeviceGetGpuInstanceRemainingCapacityFn,
                   nvmlDeviceGetGpuInstanceRemainingCapacity);
DRA_SAME_SIGNATURE(DeviceCreateGpuInstanceFn, nvmlDeviceCreateGpuInstance);
DRA_SAME_SIGNATURE(DeviceCreateGpuInstanceWithPlacementFn,
                   nvmlDeviceCreateGpuInstanceWithPlacement);
DRA_SAME_SIGNATURE(DeviceGetGpuInstancesFn, nvmlDeviceGetGpuInstances);
DRA_SAME_SIGNATURE(DeviceGetGpuInstanceByIdFn, nvmlDeviceGetGpuInstanceById);
DRA_SAME_SIGNATURE(GpuInstanceDestroyFn, nvmlGpuInstanceDestroy);
DRA_SAME_SIGNATURE(GpuInstanceGetInfoFn, nvmlGpuInstanceGetInfo);
DRA_SAME_SIGNATURE(GpuInstanceGetComputeInstanceProfileInfoFn,
                   nvmlGpuInstanceGetComputeInstanceProfileInfo);
DRA_SAME_SIGNATURE(GpuInstanceGetComputeInstanceProfileInfoVFn,
                   nvmlGpuInstanceGetComputeInstanceProfileInfoV);
DRA_SAME_SIGNATURE(GpuInstanceGetComputeInstanceRemainingCapacityFn,
                   nvmlGpuInstanceGetComputeInstanceRemainingCapacity);
DRA_SAME_SIGNATURE(GpuInstanceCreateComputeInstanceFn, nvmlGpuInstanceCreateComputeInstance);
DRA_SAME_SIGNATURE(GpuInstanceGetComputeInstancesFn, nvmlGpuInstanceGetComputeInstances);
DRA_SAME_SIGNATURE(GpuInstanceGetComputeInstanceByIdFn, nvmlGpuInstanceGetComputeInstanceById);
DRA_SAME_SIGNATURE(ComputeInstanceDestroyFn, nvmlComputeInstanceDestroy);
DRA_SAME_SIGNATURE(ComputeInstanceGetInfoFn, nvmlComputeInstanceGetInfo_v2);
DRA_SAME_SIGNATURE(DeviceGetUintFn, nvmlDeviceGetMaxMigDeviceCount);
DRA_SAME_SIGNATURE(DeviceGetMigDeviceHandleByIndexFn, nvmlDeviceGetMigDeviceHandleByIndex);
DRA_SAME_SIGNATURE(DeviceGetDeviceHandleFromMigDeviceHandleFn,
                   nvmlDeviceGetDeviceHandleFromMigDeviceHandle);
DRA_SAME_SIGNATURE(DeviceGetUintFn, nvmlDeviceGetGpuInstanceId);
DRA_SAME_SIGNATURE(DeviceGetUintFn, nvmlDeviceGetComputeInstanceId);
DRA_SAME_SIGNATURE(EventSetCreateFn, nvmlEventSetCreate);
DRA_SAME_SIGNATURE(DeviceGetSupportedEventTypesFn, nvmlDeviceGetSupportedEventTypes);
DRA_SAME_SIGNATURE(DeviceRegisterEventsFn, nvmlDeviceRegisterEvents);
DRA_SAME_SIGNATURE(EventSetWaitFn, nvmlEventSetWait_v2);
DRA_SAME_SIGNATURE(EventSetFreeFn, nvmlEventSetFree);

// The structure version macros use the official NVML_STRUCT_VERSION; ours are computed by
// abi::StructVersion. Equal values above prove both the size and the version byte.

TEST(NvmlAbiConformanceTest, StructLayoutsMatchOfficialHeader) {
  EXPECT_EQ(sizeof(abi::PciInfo), sizeof(nvmlPciInfo_t));
  EXPECT_EQ(sizeof(abi::GpuInstanceProfileInfoV2), sizeof(nvmlGpuInstanceProfileInfo_v2_t));
  EXPECT_EQ(offsetof(abi::ComputeInstanceInfo, placement),
            offsetof(nvmlComputeInstanceInfo_t, placement));
}

TEST(NvmlAbiConformanceTest, ConstantsMatchOfficialHeader) {
  EXPECT_EQ(abi::kMemoryV2Version, nvmlMemory_v2);
  EXPECT_EQ(abi::kGpuInstanceProfileInfoV2Version, nvmlGpuInstanceProfileInfo_v2);
  EXPECT_EQ(abi::kErrorUnknown, NVML_ERROR_UNKNOWN);
}

TEST(NvmlAbiConformanceTest, NewerConstantsExtendTheOfficialOnes) {
  // Our counts cover profiles newer than the 11.8 header; they can only be larger.
  EXPECT_GE(abi::kGpuInstanceProfileCount,
            static_cast<unsigned int>(NVML_GPU_INSTANCE_PROFILE_COUNT));
  EXPECT_GE(abi::kComputeInstanceProfileCount,
            static_cast<unsigned int>(NVML_COMPUTE_INSTANCE_PROFILE_COUNT));
}

}  // namespace
