#pragma once

// Fabric Manager partitions in the GPU plugin (gate FabricManagerPartitioning,
// docs/fabric-manager.md): the partition attributes of the published GPUs, and the prepare step
// `fabricPartition` (claim_steps.h) that activates the partition of a claim's GPUs.
//
// A claim's physical GPUs are its full GPUs and the GPUs behind its VFIO devices (MIG devices do
// not count). Their module IDs (nvmlDeviceGetModuleId, by PCI bus id) must be exactly the GPUs
// of one partition FM supports; that partition is activated before any other step of the
// prepare. A claim whose GPUs match no partition fails before anything changed, with
//   fabric manager: GPU module set [1 2 3] does not match any FM partition; refusing partition
//   activation
// and a GPU whose module ID is unknown fails likewise, naming the device.
//
// The step is external and not resumable: recorded (PrepareStarted) with its undo data
// {"partition", "modules", "gpus" (PCI bus ids)} before FM is asked, so that a retried prepare,
// unprepare or the cleanup finds the partition from the record alone, also after a restart
// (FM keeps the partition's state, not the plugin). Apply activates, or finds it active already.
// Undo deactivates, unless another claim of the checkpoint (in any state: a PrepareStarted one
// may be using its GPUs already) records one of the partition's GPUs: with consumable shares two
// claims may share GPUs and so their partition, and the last one to go deactivates it.
//
// Thread-safety: the steps of one claim run on one thread (the device state's mutex); the FM
// client serializes its own calls.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/checkpoint/format.h"
#include "lib/fabricmanager/fabric_manager.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/gpuplugin/record/prepared.h"
#include "lib/prepare/plan.h"
#include "nlohmann/json.hpp"

namespace dra::gpu {

inline constexpr char kFabricPartitionStep[] = "fabricPartition";

// What the plugin knows of the node's fabric, from startup on.
struct FabricPartitioning {
  const fm::FabricManager* manager = nullptr;            // activates and deactivates
  std::vector<fm::Partition> partitions;                 // as FM listed them at startup (validated)
  std::map<std::string, unsigned int> module_by_bus_id;  // physical GPUs with a module ID
};

// Lists and validates the partitions of `manager` (fm::ValidatePartitions) and collects the
// module IDs of the inventory's GPUs (GpuInfo::module_id, the parents of MIG devices included).
absl::StatusOr<FabricPartitioning> LoadFabricPartitioning(const fm::FabricManager* manager,
                                                          const Inventory& inventory);

// Adds to the inventory's gpu and vfio devices `gpuModuleID` (int, when not 0) and, for each
// partition size N, `partition<N>` (int): the ID of the first size-N partition holding the GPU.
void AddFabricAttributes(Inventory& inventory, const FabricPartitioning& fabric);

// The partition a claim activates.
struct FabricTarget {
  fm::abi::PartitionId partition = 0;
  std::vector<unsigned int> modules;  // sorted
  std::vector<std::string> gpus;      // PCI bus ids, sorted

  friend bool operator==(const FabricTarget&, const FabricTarget&) = default;
};

// The partition of `devices` (a claim's): nullopt when it has no full GPU and no VFIO device.
// FailedPrecondition when a GPU's module ID is unknown, or (the spec's message) when no partition
// has exactly these GPUs. No side effect.
absl::StatusOr<std::optional<FabricTarget>> FabricTargetOf(
    const FabricPartitioning& fabric, const std::vector<RecordedDevice>& devices);

// The step. Null `manager`: Apply fails (Internal).
std::unique_ptr<prepare::PlanStep> FabricPartitionStep(FabricTarget target,
                                                       const fm::FabricManager* manager);

// Its Undo from the record alone (see above). `all`: every checkpointed claim; `uid`: this
// claim. InvalidArgument naming the field for a malformed record; FailedPrecondition when the
// partition must be deactivated and `manager` is null (gate off, or no fabric found).
absl::Status UndoFabricPartition(const std::string& uid, const checkpoint::ClaimMap& all,
                                 const fm::FabricManager* manager, const nlohmann::json& undo);

}  // namespace dra::gpu
