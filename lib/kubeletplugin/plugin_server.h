#pragma once

// Serves a DraDriver to the kubelet: the DRA node service (v1, v1beta1, optionally health) on the
// driver's dra socket, then the plugin-watcher registration service in the kubelet's registry
// directory. Replicates k8s.io/dynamic-resource-allocation/kubeletplugin's node side (without the
// ResourceSlice publisher, which lives apart).
//
// Paths (defaults shown; tests and the product pass their own):
//   DRA socket           <kubelet_plugins_dir>/<driver>/dra.sock  (rolling update:
//   dra-<podUID>.sock) registration socket  <registry_dir>/<driver>-reg.sock     (rolling update:
//   <driver>-<podUID>-reg.sock) serialize lock       <plugin data dir>/serialize.lock     (rolling
//   update only)
// The kubelet dials the DRA socket path it is told verbatim, so the paths must be the same inside
// and outside the plugin's container.
//
// Directories: the kubelet's directories (kubelet_plugins_dir, registry_dir) must exist, since a
// missing one means the host mount is missing and the kubelet would never see us. The driver's
// own plugin data directory is created (mode 0750) if missing.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/kubeletplugin/claim_source.h"
#include "lib/kubeletplugin/driver.h"
#include "lib/kubeletplugin/plugin_types.h"

namespace dra::kubeletplugin {

inline constexpr char kDefaultKubeletPluginsDir[] = "/var/lib/kubelet/plugins";
inline constexpr char kDefaultKubeletRegistryDir[] = "/var/lib/kubelet/plugins_registry";

// Supported-version strings advertised at registration, in the order advertised.
inline constexpr char kDraV1Service[] = "v1.DRAPlugin";
inline constexpr char kDraV1beta1Service[] = "v1beta1.DRAPlugin";
inline constexpr char kDraHealthService[] = "v1alpha1.DRAResourceHealth";

struct PluginServerOptions {
  std::string driver_name;  // required, e.g. "gpu.nvidia.com"
  // Required: reads the claims named in NodePrepareResources (see ClaimGetterFromClient).
  ClaimGetter claim_getter;
  // Optional: a local copy of claims asked before claim_getter (ClaimCache); must outlive the
  // server.
  ClaimLookup* claim_lookup = nullptr;

  std::string kubelet_plugins_dir = kDefaultKubeletPluginsDir;
  // Empty: <kubelet_plugins_dir>/<driver_name>.
  std::string plugin_data_dir;
  std::string registry_dir = kDefaultKubeletRegistryDir;

  // Non-empty: rolling-update mode (kubelet >= 1.33). This instance's pod UID goes into both
  // socket names so that old and new instances can serve side by side, and prepare/unprepare are
  // serialized across instances by a flock on <serialize_lock_dir>/serialize.lock.
  std::string pod_uid;
  std::string serialize_lock_dir;  // empty: the plugin data directory
  // Rolling-update mode: sockets of earlier instances (other pod UIDs) that nobody listens on and
  // that are older than this are removed at start (stale_sockets.h).
  absl::Duration stale_socket_min_age = absl::Seconds(10);

  // True: prepare/unprepare never run concurrently in the driver (see DraDriver). False: the
  // driver handles concurrency itself (and then no lock file is used, even in rolling-update
  // mode).
  bool serialize = true;
  // Upper bound on waiting for the serialization; the kubelet's own deadline also bounds it.
  absl::Duration lock_timeout = absl::Seconds(30);
  // Log one per-stage trace line per prepare/unprepare call (NodeService; also at -v=5).
  bool trace_calls = false;

  bool serve_v1 = true;
  bool serve_v1beta1 = true;
  // Advertise DRAResourceHealth and send the lists given to PublishHealth. Without it the service
  // is still on the DRA socket, and its streams stay open and send nothing: the kubelet (v1.36,
  // gate ResourceHealthStatus) opens one on every DRA plugin, advertised or not, and retries a
  // failed one every 5 s with an error in its log.
  bool serve_health = false;

  // Called on a gRPC thread after each NotifyRegistrationStatus; must return quickly.
  std::function<void(const RegistrationStatus&)> on_registration_status;
};

// Thread-safety: every method may be called from any thread. Stop (or the destructor) must not
// be called from inside a DraDriver method or a registration callback: it waits for running
// calls to return.
class PluginServer {
 public:
  // Validates `options`, starts the DRA server on its socket and then the registration server.
  // `driver` must outlive the returned server. Fails (with nothing left listening) on bad
  // options, missing kubelet directories, overlong socket paths or a socket that cannot be made.
  static absl::StatusOr<std::unique_ptr<PluginServer>> Create(DraDriver* driver,
                                                              PluginServerOptions options);
  ~PluginServer();

  // Stops the DRA server (running calls get a short grace period), then the registration server,
  // removing both socket files. Idempotent.
  void Stop();

  // Replaces the device health list sent to the kubelet. A no-op unless serve_health is set.
  void PublishHealth(std::vector<DeviceHealth> devices);

  // Empty until the kubelet has answered our registration.
  std::optional<RegistrationStatus> registration_status() const;

  const std::string& dra_socket_path() const { return dra_socket_path_; }
  const std::string& registration_socket_path() const { return registration_socket_path_; }
  // Empty unless serialization across instances is in use.
  const std::string& serialize_lock_path() const { return serialize_lock_path_; }
  const std::vector<std::string>& supported_versions() const { return supported_versions_; }

 private:
  struct Impl;
  explicit PluginServer(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  std::string dra_socket_path_;
  std::string registration_socket_path_;
  std::string serialize_lock_path_;
  std::vector<std::string> supported_versions_;
};

}  // namespace dra::kubeletplugin
