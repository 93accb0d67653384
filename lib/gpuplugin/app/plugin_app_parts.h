#pragma once

// What a running gpu-kubelet-plugin holds (PluginApp::Parts), shared by plugin_app.cc (start-up:
// configuration, API server, devices, checkpoint, device state) and plugin_app_serve.cc (serving:
// the kubelet socket, health monitoring, metrics, cleanup). Private to those two files.

#include <atomic>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/api/consumable_shares.h"
#include "lib/api/driver_gates.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/common/atomic_file.h"
#include "lib/common/log.h"
#include "lib/common/stack_dump.h"
#include "lib/common/status.h"
#include "lib/driverroot/driver_root.h"
#include "lib/gpuplugin/app/plugin_app.h"
#include "lib/gpuplugin/fabric/fabric_step.h"
#include "lib/gpuplugin/health/device_health.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/gpuplugin/inventory/partitionable_slices.h"
#include "lib/gpuplugin/inventory/slices.h"
#include "lib/gpuplugin/mig/mig_manager.h"
#include "lib/gpuplugin/mps/mps_sharing.h"
#include "lib/gpuplugin/prepare/claim_cdi.h"
#include "lib/gpuplugin/prepare/claim_steps.h"
#include "lib/gpuplugin/prepare/cleanup.h"
#include "lib/gpuplugin/prepare/device_metadata.h"
#include "lib/gpuplugin/prepare/device_state.h"
#include "lib/gpuplugin/prepare/driver.h"
#include "lib/gpuplugin/prepare/rebuild.h"
#include "lib/gpuplugin/record/go_prepared.h"
#include "lib/gpuplugin/status/device_status.h"
#include "lib/gpuplugin/status/device_status_queue.h"
#include "lib/gpuplugin/timeslicing/nvidia_smi.h"
#include "lib/gpuplugin/timeslicing/time_slicing.h"
#include "lib/gpuplugin/vfio/vfio_claim.h"
#include "lib/gpuplugin/vfio/vfio_setup.h"
#include "lib/k8s/client.h"
#include "lib/k8s/events.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/wire_decode.h"
#include "lib/kubeletplugin/claim_cache.h"
#include "lib/kubeletplugin/claim_source.h"
#include "lib/kubeletplugin/plugin_host.h"
#include "lib/kubeletplugin/plugin_server.h"
#include "lib/kubeletplugin/slice_publisher.h"
#include "lib/nvml/nvml.h"

namespace dra::gpu {

// The component named in the Node events the plugin posts.
inline constexpr char kPluginComponent[] = "gpu-kubelet-plugin";

struct PluginApp::Parts {
  // First, so that it goes last: the parts below use its clients, checkpoint and registry; its
  // Stop releases the servers that point into the parts.
  std::unique_ptr<kubeletplugin::PluginHost> host;
  api::ConsumableShares shares;
  // Claim status writes (best effort): no retry, a short timeout, this driver's and node's field
  // manager.
  std::unique_ptr<k8s::Client> status_client;
  std::unique_ptr<DeviceStatusWriter> device_status_api;
  // What prepare and unprepare write through: the ordered background writer in front of
  // device_status_api (device_status_queue.h), so that no API round trip is on the kubelet's call.
  std::unique_ptr<DeviceStatusQueue> device_status;
  // Device metadata files (gate DeviceMetadata); also without the gate, so that unprepare removes
  // those a record names.
  std::unique_ptr<DeviceMetadataFiles> metadata;
  metrics::Family<metrics::Gauge>* degraded = nullptr;
  metrics::Family<metrics::Counter>* health_recoveries = nullptr;
  std::unique_ptr<driverroot::DriverRoot> root;
  Inventory inventory;
  // DynamicMIG with a counter set to publish: partitionable slices in this layout (by the API
  // server's version, read once at startup); unset: BuildDriverResources.
  std::optional<SliceLayout> partitionable_layout;
  std::unique_ptr<nvml::Nvml> nvml_library;    // kept for the device health monitor
  std::unique_ptr<nvml::Session> mig_session;  // DynamicMIG
  std::unique_ptr<MigManager> mig;
  // PassthroughSupport (vfio_setup.h), and the devices claims hold: their gpu/vfio siblings are
  // left out of the slice (vfio_claim.h).
  std::unique_ptr<VfioRuntime> vfio;
  // FabricManagerPartitioning on a node with an NVLink fabric (fabric_step.h); null otherwise.
  std::unique_ptr<fm::NvfmLibrary> fabric_manager;
  std::unique_ptr<FabricPartitioning> fabric;
  mutable absl::Mutex held_mu;
  std::set<std::string> held ABSL_GUARDED_BY(held_mu);
  checkpoint::Checkpoint* checkpoint = nullptr;  // the host's
  std::unique_ptr<ClaimCdi> cdi;
  std::unique_ptr<NvidiaSmi> nvidia_smi;
  std::unique_ptr<TimeSlicing> time_slicing;
  std::unique_ptr<MpsDaemons> mps;
  std::unique_ptr<DeviceState> state;
  std::unique_ptr<GpuDriver> driver;
  std::unique_ptr<ClaimApi> claim_api;
  kubeletplugin::SlicePublisher* publisher = nullptr;  // the host's
  std::unique_ptr<DeviceHealthTracker> health_tracker;
  // --claim-informer: prepare's claim reads from memory; outlives the server that asks it.
  std::unique_ptr<kubeletplugin::ClaimCache> claim_cache;
  kubeletplugin::PluginServer* server = nullptr;  // the host's, until its Stop
  std::unique_ptr<DeviceHealthMonitor> health_monitor;
  std::unique_ptr<Cleanup> cleanup;

  // The slices to publish: the inventory's devices, with the taints their health implies.
  kubeletplugin::DriverResources DesiredResources(const std::string& node_name) const {
    Inventory published_vfio;
    if (vfio) {
      absl::MutexLock lock(&held_mu);
      published_vfio = WithoutHeldSiblings(inventory, held);
    }
    const Inventory& published = vfio ? published_vfio : inventory;
    kubeletplugin::DriverResources resources =
        partitionable_layout
            ? BuildPartitionableResources(published, node_name, shares, *partitionable_layout)
            : BuildDriverResources(published, node_name, shares);
    if (health_tracker) {
      for (auto& [pool_name, pool] : resources.pools) {
        for (auto& slice : pool.slices) health_tracker->ApplyTaints(slice.devices);
      }
    }
    return resources;
  }
};

}  // namespace dra::gpu
