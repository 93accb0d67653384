#pragma once

// Our own declarations of the few Fabric Manager API entry points and types the GPU plugin uses
// (gate FabricManagerPartitioning, docs/fabric-manager.md), written from NVIDIA's public FM API
// documentation (names, layouts, return codes): libnvfm.so is dlopen'ed, never linked, so no
// NVIDIA header is needed to build. Only what the loader (fabric_manager.cc) and the fake library
// (test/doubles/fake-nvfm) need is here.

#include <cstddef>

namespace dra::fm::abi {

// fmReturn_t
enum Return : int {
  kSuccess = 0,
  kBadParam = -1,
  kGenericError = -2,
  kNotSupported = -3,
  kUninitialized = -4,
  kTimeout = -5,
  kVersionMismatch = -6,
  kInUse = -7,
  kNotConfigured = -8,
  kConnectionNotValid = -9,
  kNvlinkError = -10,
};

// "FM_ST_IN_USE" etc.; "FM_ST_<code>" for unknown codes.
const char* ReturnName(int code);

using Handle = void*;              // fmHandle_t
using PartitionId = unsigned int;  // fmFabricPartitionId_t

inline constexpr size_t kMaxStrLength = 256;           // FM_MAX_STR_LENGTH
inline constexpr size_t kUuidBufferSize = 80;          // FM_UUID_BUFFER_SIZE
inline constexpr size_t kPciBusIdBufferSize = 32;      // FM_DEVICE_PCI_BUS_ID_BUFFER_SIZE
inline constexpr size_t kMaxNumGpus = 16;              // FM_MAX_NUM_GPUS
inline constexpr size_t kMaxFabricPartitions = 64;     // FM_MAX_FABRIC_PARTITIONS
inline constexpr unsigned int kDefaultTcpPort = 6666;  // FM_CMD_PORT_NUMBER

// A versioned struct's version word: its size, with the version number in the top byte.
template <typename T>
constexpr unsigned int StructVersion(unsigned int version) {
  return static_cast<unsigned int>(sizeof(T)) | (version << 24);
}

// fmConnectParams_v1
struct ConnectParams {
  unsigned int version;
  char address_info[kMaxStrLength];  // "host:port", or a socket path
  unsigned int timeout_ms;
  unsigned int address_is_unix_socket;  // 1: address_info is a unix socket path
};
inline constexpr unsigned int kConnectParamsVersion = StructVersion<ConnectParams>(1);

// fmFabricPartitionGpuInfo_t
struct PartitionGpuInfo {
  unsigned int physical_id;  // the GPU's module ID (nvmlDeviceGetModuleId)
  char uuid[kUuidBufferSize];
  char pci_bus_id[kPciBusIdBufferSize];
  unsigned int num_nvlinks_available;
  unsigned int max_num_nvlinks;
  unsigned int nvlink_line_rate_mbps;
};

// fmFabricPartitionInfo_t
struct PartitionInfo {
  PartitionId partition_id;
  unsigned int is_active;  // 1: active
  unsigned int num_gpus;
  PartitionGpuInfo gpu_info[kMaxNumGpus];
};

// fmFabricPartitionList_v2 (its version word says 1)
struct PartitionList {
  unsigned int version;
  unsigned int num_partitions;
  unsigned int max_num_partitions;
  PartitionInfo partition_info[kMaxFabricPartitions];
};
inline constexpr unsigned int kPartitionListVersion = StructVersion<PartitionList>(1);

static_assert(sizeof(ConnectParams) == 268);
static_assert(sizeof(PartitionGpuInfo) == 128);
static_assert(sizeof(PartitionInfo) == 12 + 16 * 128);
static_assert(sizeof(PartitionList) == 12 + 64 * sizeof(PartitionInfo));

// The entry points (C linkage in the library).
using LibInitFn = Return();
using LibShutdownFn = Return();
using ConnectFn = Return(ConnectParams* params, Handle* handle);
using DisconnectFn = Return(Handle handle);
using GetSupportedFabricPartitionsFn = Return(Handle handle, PartitionList* list);
using ActivateFabricPartitionFn = Return(Handle handle, PartitionId id);
using DeactivateFabricPartitionFn = Return(Handle handle, PartitionId id);

}  // namespace dra::fm::abi
