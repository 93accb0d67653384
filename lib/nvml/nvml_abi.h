#pragma once

// Our own declarations of the subset of the NVML C ABI (libnvidia-ml.so.1) that this project
// uses: return codes, constants, versioned struct layouts and function signatures.
//
// Facts (names, values, layouts) follow NVIDIA's public NVML documentation; the declarations are
// written here, in our own names, inside namespace dra::nvml::abi so that they never collide with
// an official nvml.h. abi_conformance_test.cc compiles this header beside Debian's
// /usr/include/nvml.h and checks every size, offset and value that both declare.
//
// Who may include this header: lib/nvml (the loader and facade) and the test doubles that
// implement or call the same ABI (test/doubles/mock-nvml, test/doubles/nvidia-smi). Product code
// outside lib/nvml uses the facade in lib/nvml/nvml.h and never sees these types.
//
// C enums are 4-byte ints on every Linux ABI we target, so enum-typed parameters and fields are
// declared as `int` here.

#include <cstddef>
#include <cstdint>

namespace dra::nvml::abi {

// ---- Return codes (nvmlReturn_t) ---------------------------------------------------------------

using Return = int;
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorAlreadyInitialized = 5;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorInsufficientPower = 8;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorTimeout = 10;
inline constexpr Return kErrorIrqIssue = 11;
inline constexpr Return kErrorLibraryNotFound = 12;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorCorruptedInforom = 14;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorResetRequired = 16;
inline constexpr Return kErrorOperatingSystem = 17;
inline constexpr Return kErrorLibRmVersionMismatch = 18;
inline constexpr Return kErrorInUse = 19;
inline constexpr Return kErrorMemory = 20;
inline constexpr Return kErrorNoData = 21;
inline constexpr Return kErrorVgpuEccNotSupported = 22;
inline constexpr Return kErrorInsufficientResources = 23;
inline constexpr Return kErrorFreqNotSupported = 24;
inline constexpr Return kErrorArgumentVersionMismatch = 25;
inline constexpr Return kErrorUnknown = 999;

// ---- Opaque handles -----------------------------------------------------------------------------

struct DeviceOpaque;
struct GpuInstanceOpaque;
struct ComputeInstanceOpaque;
struct EventSetOpaque;
using DeviceHandle = DeviceOpaque*;                    // nvmlDevice_t (full GPU or MIG device)
using GpuInstanceHandle = GpuInstanceOpaque*;          // nvmlGpuInstance_t
using ComputeInstanceHandle = ComputeInstanceOpaque*;  // nvmlComputeInstance_t
using EventSetHandle = EventSetOpaque*;                // nvmlEventSet_t

// ---- Buffer sizes and flags ---------------------------------------------------------------------

inline constexpr unsigned int kDevicePciBusIdBufferSize = 32;
inline constexpr unsigned int kDevicePciBusIdBufferV2Size = 16;
inline constexpr unsigned int kDeviceUuidBufferSize = 80;
inline constexpr unsigned int kDeviceUuidV2BufferSize = 96;
inline constexpr unsigned int kDeviceNameBufferSize = 64;
inline constexpr unsigned int kDeviceNameV2BufferSize = 96;
inline constexpr unsigned int kSystemDriverVersionBufferSize = 80;
inline constexpr unsigned int kSystemNvmlVersionBufferSize = 80;

// nvmlInitWithFlags flags.
inline constexpr unsigned int kInitFlagNoGpus = 1;    // do not fail when no GPU is found
inline constexpr unsigned int kInitFlagNoAttach = 2;  // do not attach GPUs

// nvmlEnableState_t
inline constexpr int kFeatureDisabled = 0;
inline constexpr int kFeatureEnabled = 1;

// nvmlBrandType_t
inline constexpr int kBrandUnknown = 0;
inline constexpr int kBrandQuadro = 1;
inline constexpr int kBrandTesla = 2;
inline constexpr int kBrandNvs = 3;
inline constexpr int kBrandGrid = 4;
inline constexpr int kBrandGeforce = 5;
inline constexpr int kBrandTitan = 6;
inline constexpr int kBrandNvidiaVapps = 7;
inline constexpr int kBrandNvidiaVpc = 8;
inline constexpr int kBrandNvidiaVcs = 9;
inline constexpr int kBrandNvidiaVws = 10;
inline constexpr int kBrandNvidiaCloudGaming = 11;
inline constexpr int kBrandQuadroRtx = 12;
inline constexpr int kBrandNvidiaRtx = 13;
inline constexpr int kBrandNvidia = 14;
inline constexpr int kBrandGeforceRtx = 15;
inline constexpr int kBrandTitanRtx = 16;

// nvmlComputeMode_t
inline constexpr int kComputeModeDefault = 0;
inline constexpr int kComputeModeExclusiveThread = 1;  // no longer supported by drivers
inline constexpr int kComputeModeProhibited = 2;
inline constexpr int kComputeModeExclusiveProcess = 3;

// nvmlDeviceArchitecture_t (an unsigned int)
inline constexpr unsigned int kArchKepler = 2;
inline constexpr unsigned int kArchMaxwell = 3;
inline constexpr unsigned int kArchPascal = 4;
inline constexpr unsigned int kArchVolta = 5;
inline constexpr unsigned int kArchTuring = 6;
inline constexpr unsigned int kArchAmpere = 7;
inline constexpr unsigned int kArchAda = 8;
inline constexpr unsigned int kArchHopper = 9;
inline constexpr unsigned int kArchBlackwell = 10;  // newer than Debian's nvml.h 11.8
inline constexpr unsigned int kArchRubin = 13;
inline constexpr unsigned int kArchUnknown = 0xffffffff;

// nvmlGpuVirtualizationMode_t
inline constexpr int kVirtualizationModeNone = 0;
inline constexpr int kVirtualizationModePassthrough = 1;
inline constexpr int kVirtualizationModeVgpu = 2;
inline constexpr int kVirtualizationModeHostVgpu = 3;
inline constexpr int kVirtualizationModeHostVsga = 4;

// nvmlDeviceAddressingModeType_t (newer than Debian's nvml.h 11.8)
inline constexpr unsigned int kAddressingModeNone = 0;
inline constexpr unsigned int kAddressingModeHmm = 1;
inline constexpr unsigned int kAddressingModeAts = 2;

// ---- Versioned structs --------------------------------------------------------------------------

// NVML_STRUCT_VERSION(T, v): the struct size in the low bits, the version in the top byte.
template <typename T>
constexpr unsigned int StructVersion(unsigned int version) {
  return static_cast<unsigned int>(sizeof(T)) | (version << 24U);
}

// nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v3.
struct PciInfo {
  char bus_id_legacy[kDevicePciBusIdBufferV2Size];  // "%04X:%02X:%02X.0"
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;              // device id << 16 | vendor id
  unsigned int pci_subsystem_id;           // subsystem device id << 16 | subsystem vendor id
  char bus_id[kDevicePciBusIdBufferSize];  // "%08X:%02X:%02X.0"
};

// nvmlMemory_t
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// nvmlMemory_v2_t; `version` must be kMemoryV2Version.
struct MemoryV2 {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
inline constexpr unsigned int kMemoryV2Version = StructVersion<MemoryV2>(2);

// nvmlDeviceAttributes_t (nvmlDeviceGetAttributes_v2; meaningful for MIG devices).
struct DeviceAttributes {
  unsigned int multiprocessor_count;
  unsigned int shared_copy_engine_count;
  unsigned int shared_decoder_count;
  unsigned int shared_encoder_count;
  unsigned int shared_jpeg_count;
  unsigned int shared_ofa_count;
  unsigned int gpu_instance_slice_count;
  unsigned int compute_instance_slice_count;
  unsigned long long memory_size_mb;
};

// nvmlDeviceAddressingMode_t (v1); `version` must be kDeviceAddressingModeV1Version.
struct DeviceAddressingMode {
  unsigned int version;
  unsigned int value;  // kAddressingMode*
};
inline constexpr unsigned int kDeviceAddressingModeV1Version =
    StructVersion<DeviceAddressingMode>(1);

// ---- Multi-Instance GPU -------------------------------------------------------------------------

inline constexpr unsigned int kDeviceMigDisable = 0;
inline constexpr unsigned int kDeviceMigEnable = 1;

// GPU instance profile indexes (NVML_GPU_INSTANCE_PROFILE_*), passed to
// nvmlDeviceGetGpuInstanceProfileInfo. Not to be confused with the profile *id* the call returns.
inline constexpr unsigned int kGpuInstanceProfile1Slice = 0x0;
inline constexpr unsigned int kGpuInstanceProfile2Slice = 0x1;
inline constexpr unsigned int kGpuInstanceProfile3Slice = 0x2;
inline constexpr unsigned int kGpuInstanceProfile4Slice = 0x3;
inline constexpr unsigned int kGpuInstanceProfile7Slice = 0x4;
inline constexpr unsigned int kGpuInstanceProfile8Slice = 0x5;
inline constexpr unsigned int kGpuInstanceProfile6Slice = 0x6;
inline constexpr unsigned int kGpuInstanceProfile1SliceRev1 = 0x7;  // +me
inline constexpr unsigned int kGpuInstanceProfile2SliceRev1 = 0x8;  // +me
inline constexpr unsigned int kGpuInstanceProfile1SliceRev2 = 0x9;  // double memory
inline constexpr unsigned int kGpuInstanceProfile1SliceGfx = 0xA;
inline constexpr unsigned int kGpuInstanceProfile2SliceGfx = 0xB;
inline constexpr unsigned int kGpuInstanceProfile4SliceGfx = 0xC;
inline constexpr unsigned int kGpuInstanceProfile1SliceNoMe = 0xD;
inline constexpr unsigned int kGpuInstanceProfile2SliceNoMe = 0xE;
inline constexpr unsigned int kGpuInstanceProfile1SliceAllMe = 0xF;
inline constexpr unsigned int kGpuInstanceProfile2SliceAllMe = 0x10;
// The count of current drivers (R570+). Debian's nvml.h 11.8 says 0x8: it predates REV1..ALL_ME.
inline constexpr unsigned int kGpuInstanceProfileCount = 0x11;

// nvmlGpuInstancePlacement_t: a range of memory slices.
struct GpuInstancePlacement {
  unsigned int start;
  unsigned int size;
};

// nvmlGpuInstanceProfileInfo_t
struct GpuInstanceProfileInfo {
  unsigned int id;  // the profile id (e.g. 19 for A100 1g.5gb)
  unsigned int is_p2p_supported;
  unsigned int slice_count;
  unsigned int instance_count;
  unsigned int multiprocessor_count;
  unsigned int copy_engine_count;
  unsigned int decoder_count;
  unsigned int encoder_count;
  unsigned int jpeg_count;
  unsigned int ofa_count;
  unsigned long long memory_size_mb;
};

// nvmlGpuInstanceProfileInfo_v2_t; `version` must be kGpuInstanceProfileInfoV2Version.
struct GpuInstanceProfileInfoV2 {
  unsigned int version;
  unsigned int id;
  unsigned int is_p2p_supported;
  unsigned int slice_count;
  unsigned int instance_count;
  unsigned int multiprocessor_count;
  unsigned int copy_engine_count;
  unsigned int decoder_count;
  unsigned int encoder_count;
  unsigned int jpeg_count;
  unsigned int ofa_count;
  unsigned long long memory_size_mb;
  char name[kDeviceNameV2BufferSize];  // e.g. "MIG 1g.5gb"
};
inline constexpr unsigned int kGpuInstanceProfileInfoV2Version =
    StructVersion<GpuInstanceProfileInfoV2>(2);

// nvmlGpuInstanceInfo_t
struct GpuInstanceInfo {
  DeviceHandle device;  // the parent GPU
  unsigned int id;
  unsigned int profile_id;
  GpuInstancePlacement placement;
};

// Compute instance profile indexes (NVML_COMPUTE_INSTANCE_PROFILE_*).
inline constexpr unsigned int kComputeInstanceProfile1Slice = 0x0;
inline constexpr unsigned int kComputeInstanceProfile2Slice = 0x1;
inline constexpr unsigned int kComputeInstanceProfile3Slice = 0x2;
inline constexpr unsigned int kComputeInstanceProfile4Slice = 0x3;
inline constexpr unsigned int kComputeInstanceProfile7Slice = 0x4;
inline constexpr unsigned int kComputeInstanceProfile8Slice = 0x5;
inline constexpr unsigned int kComputeInstanceProfile6Slice = 0x6;
inline constexpr unsigned int kComputeInstanceProfile1SliceRev1 = 0x7;
// The count of current drivers; Debian's nvml.h 11.8 says 0x7 (before 1_SLICE_REV1).
inline constexpr unsigned int kComputeInstanceProfileCount = 0x8;

inline constexpr unsigned int kComputeInstanceEngineProfileShared = 0x0;
inline constexpr unsigned int kComputeInstanceEngineProfileCount = 0x1;

// nvmlComputeInstancePlacement_t: a range of compute slices inside the GPU instance.
struct ComputeInstancePlacement {
  unsigned int start;
  unsigned int size;
};

// nvmlComputeInstanceProfileInfo_t
struct ComputeInstanceProfileInfo {
  unsigned int id;
  unsigned int slice_count;
  unsigned int instance_count;
  unsigned int multiprocessor_count;
  unsigned int shared_copy_engine_count;
  unsigned int shared_decoder_count;
  unsigned int shared_encoder_count;
  unsigned int shared_jpeg_count;
  unsigned int shared_ofa_count;
};

// nvmlComputeInstanceProfileInfo_v2_t; `version` must be kComputeInstanceProfileInfoV2Version.
struct ComputeInstanceProfileInfoV2 {
  unsigned int version;
  unsigned int id;
  unsigned int slice_count;
  unsigned int instance_count;
  unsigned int multiprocessor_count;
  unsigned int shared_copy_engine_count;
  unsigned int shared_decoder_count;
  unsigned int shared_encoder_count;
  unsigned int shared_jpeg_count;
  unsigned int shared_ofa_count;
  char name[kDeviceNameV2BufferSize];
};
inline constexpr unsigned int kComputeInstanceProfileInfoV2Version =
    StructVersion<ComputeInstanceProfileInfoV2>(2);

// nvmlComputeInstanceInfo_t. nvmlComputeInstanceGetInfo_v2 sets `device` to the MIG device handle
// of this compute instance (which is how the upstream driver learns the MIG UUID).
struct ComputeInstanceInfo {
  DeviceHandle device;
  GpuInstanceHandle gpu_instance;
  unsigned int id;
  unsigned int profile_id;
  ComputeInstancePlacement placement;
};

// ---- Events -------------------------------------------------------------------------------------

inline constexpr unsigned long long kEventTypeSingleBitEccError = 0x1ULL;
inline constexpr unsigned long long kEventTypeDoubleBitEccError = 0x2ULL;
inline constexpr unsigned long long kEventTypePState = 0x4ULL;
inline constexpr unsigned long long kEventTypeXidCriticalError = 0x8ULL;
inline constexpr unsigned long long kEventTypeClock = 0x10ULL;
inline constexpr unsigned long long kEventTypePowerSourceChange = 0x80ULL;
inline constexpr unsigned long long kEventMigConfigChange = 0x100ULL;
inline constexpr unsigned long long kEventTypeNone = 0x0ULL;

// nvmlEventData_t
struct EventData {
  DeviceHandle device;
  unsigned long long event_type;
  unsigned long long event_data;  // the XID for kEventTypeXidCriticalError
  unsigned int gpu_instance_id;   // 0xFFFFFFFF when not attributable
  unsigned int compute_instance_id;
};

// ---- NVLink fabric (newer than Debian's nvml.h 11.8; checked by hand against R570 headers) ------

inline constexpr unsigned int kGpuFabricUuidLen = 16;
inline constexpr unsigned char kGpuFabricStateNotSupported = 0;
inline constexpr unsigned char kGpuFabricStateNotStarted = 1;
inline constexpr unsigned char kGpuFabricStateInProgress = 2;
inline constexpr unsigned char kGpuFabricStateCompleted = 3;

// nvmlGpuFabricInfo_t (nvmlDeviceGetGpuFabricInfo)
struct GpuFabricInfo {
  unsigned char cluster_uuid[kGpuFabricUuidLen];
  Return status;
  unsigned int clique_id;
  unsigned char state;  // kGpuFabricState*
};

// nvmlGpuFabricInfo_v2_t (nvmlDeviceGetGpuFabricInfoV)
struct GpuFabricInfoV2 {
  unsigned int version;
  unsigned char cluster_uuid[kGpuFabricUuidLen];
  Return status;
  unsigned int clique_id;
  unsigned char state;
  unsigned int health_mask;
};
inline constexpr unsigned int kGpuFabricInfoV2Version = StructVersion<GpuFabricInfoV2>(2);

// nvmlGpuFabricInfo_v3_t (nvmlDeviceGetGpuFabricInfoV, R570+): v2 plus a health summary.
struct GpuFabricInfoV3 {
  unsigned int version;
  unsigned char cluster_uuid[kGpuFabricUuidLen];
  Return status;
  unsigned int clique_id;
  unsigned char state;
  unsigned int health_mask;
  unsigned char health_summary;
};
inline constexpr unsigned int kGpuFabricInfoV3Version = StructVersion<GpuFabricInfoV3>(3);

static_assert(kGpuFabricInfoV2Version == 0x02000024);
static_assert(kGpuFabricInfoV3Version == 0x03000028);
static_assert(kDeviceAddressingModeV1Version == 0x01000008);

// ---- Function signatures ------------------------------------------------------------------------
// One alias per exported symbol we use (symbol name in the comment). The loader stores pointers of
// these types; the mock library static_asserts that its definitions match them.

using InitV2Fn = Return();                              // nvmlInit_v2
using InitWithFlagsFn = Return(unsigned int);           // nvmlInitWithFlags
using ShutdownFn = Return();                            // nvmlShutdown
using ErrorStringFn = const char*(Return);              // nvmlErrorString
using SystemGetStringFn = Return(char*, unsigned int);  // nvmlSystemGetDriverVersion, ..NVMLVersion
using SystemGetCudaDriverVersionFn = Return(int*);      // nvmlSystemGetCudaDriverVersion(_v2)
using DeviceGetCountFn = Return(unsigned int*);         // nvmlDeviceGetCount_v2
using DeviceGetHandleByIndexFn = Return(unsigned int,
                                        DeviceHandle*);  // nvmlDeviceGetHandleByIndex_v2
using DeviceGetHandleByStringFn = Return(const char*, DeviceHandle*);  // ..ByUUID, ..ByPciBusId_v2
using DeviceGetStringFn = Return(DeviceHandle, char*, unsigned int);   // nvmlDeviceGetName, ..UUID
using DeviceGetUintFn = Return(DeviceHandle,
                               unsigned int*);              // MinorNumber, Index, Architecture, ...
using DeviceGetIntFn = Return(DeviceHandle, int*);          // Brand, VirtualizationMode, ...
using DeviceSetIntFn = Return(DeviceHandle, int);           // SetPersistenceMode, SetComputeMode
using DeviceGetPciInfoFn = Return(DeviceHandle, PciInfo*);  // nvmlDeviceGetPciInfo_v3
using DeviceGetMemoryInfoFn = Return(DeviceHandle, Memory*);      // nvmlDeviceGetMemoryInfo
using DeviceGetMemoryInfoV2Fn = Return(DeviceHandle, MemoryV2*);  // nvmlDeviceGetMemoryInfo_v2
using DeviceGetCudaComputeCapabilityFn = Return(DeviceHandle, int*, int*);
using DeviceGetAddressingModeFn = Return(DeviceHandle, DeviceAddressingMode*);
using DeviceGetAttributesFn = Return(DeviceHandle,
                                     DeviceAttributes*);  // nvmlDeviceGetAttributes_v2
using DeviceGetGpuFabricInfoFn = Return(DeviceHandle, GpuFabricInfo*);
using DeviceGetGpuFabricInfoVFn = Return(DeviceHandle, GpuFabricInfoV3*);  // v2 or v3 by version
using DeviceGetMigModeFn = Return(DeviceHandle, unsigned int*, unsigned int*);
using DeviceSetMigModeFn = Return(DeviceHandle, unsigned int, Return*);
using DeviceGetGpuInstanceProfileInfoFn = Return(DeviceHandle, unsigned int,
                                                 GpuInstanceProfileInfo*);
using DeviceGetGpuInstanceProfileInfoVFn = Return(DeviceHandle, unsigned int,
                                                  GpuInstanceProfileInfoV2*);
using DeviceGetGpuInstancePossiblePlacementsFn = Return(DeviceHandle, unsigned int,
                                                        GpuInstancePlacement*,
                                                        unsigned int*);  // .._v2
using DeviceGetGpuInstanceRemainingCapacityFn = Return(DeviceHandle, unsigned int, unsigned int*);
using DeviceCreateGpuInstanceFn = Return(DeviceHandle, unsigned int, GpuInstanceHandle*);
using DeviceCreateGpuInstanceWithPlacementFn = Return(DeviceHandle, unsigned int,
                                                      const GpuInstancePlacement*,
                                                      GpuInstanceHandle*);
using DeviceGetGpuInstancesFn = Return(DeviceHandle, unsigned int, GpuInstanceHandle*,
                                       unsigned int*);
using DeviceGetGpuInstanceByIdFn = Return(DeviceHandle, unsigned int, GpuInstanceHandle*);
using GpuInstanceDestroyFn = Return(GpuInstanceHandle);
using GpuInstanceGetInfoFn = Return(GpuInstanceHandle, GpuInstanceInfo*);
using GpuInstanceGetComputeInstanceProfileInfoFn = Return(GpuInstanceHandle, unsigned int,
                                                          unsigned int,
                                                          ComputeInstanceProfileInfo*);
using GpuInstanceGetComputeInstanceProfileInfoVFn = Return(GpuInstanceHandle, unsigned int,
                                                           unsigned int,
                                                           ComputeInstanceProfileInfoV2*);
using GpuInstanceGetComputeInstanceRemainingCapacityFn = Return(GpuInstanceHandle, unsigned int,
                                                                unsigned int*);
using GpuInstanceCreateComputeInstanceFn = Return(GpuInstanceHandle, unsigned int,
                                                  ComputeInstanceHandle*);
using GpuInstanceGetComputeInstancesFn = Return(GpuInstanceHandle, unsigned int,
                                                ComputeInstanceHandle*, unsigned int*);
using GpuInstanceGetComputeInstanceByIdFn = Return(GpuInstanceHandle, unsigned int,
                                                   ComputeInstanceHandle*);
using ComputeInstanceDestroyFn = Return(ComputeInstanceHandle);
using ComputeInstanceGetInfoFn = Return(ComputeInstanceHandle, ComputeInstanceInfo*);  // .._v2
using DeviceGetMigDeviceHandleByIndexFn = Return(DeviceHandle, unsigned int, DeviceHandle*);
using DeviceGetDeviceHandleFromMigDeviceHandleFn = Return(DeviceHandle, DeviceHandle*);
using EventSetCreateFn = Return(EventSetHandle*);
using DeviceGetSupportedEventTypesFn = Return(DeviceHandle, unsigned long long*);
using DeviceRegisterEventsFn = Return(DeviceHandle, unsigned long long, EventSetHandle);
using EventSetWaitFn = Return(EventSetHandle, EventData*, unsigned int);  // nvmlEventSetWait_v2
using EventSetFreeFn = Return(EventSetHandle);

}  // namespace dra::nvml::abi
