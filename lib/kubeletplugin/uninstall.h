#pragma once

// What a kubelet plugin leaves on its node when the driver is uninstalled (docs/helm.md,
// "Uninstall"): nothing it wrote, unless a claim is still prepared.
//
// `helm uninstall` deletes the plugins' DaemonSet; the garbage collector then deletes its pods,
// and each plugin gets SIGTERM. A restart, a rolling update or a drain stop the plugin too, but
// leave the DaemonSet. So a plugin watches its own DaemonSet from start (UninstallWatch) and, at
// shutdown, removes its files (RemoveDriverFiles) only when it saw the DaemonSet deleted. The
// watch must run before the shutdown: Helm deletes the plugins' RBAC and service account with the
// release, so a request made at SIGTERM is refused, while an open watch still delivers the
// deletion.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lib/checkpoint/checkpoint.h"
#include "lib/k8s/client.h"
#include "lib/k8s/informer.h"
#include "lib/k8s/objects_apps.h"

namespace dra::kubeletplugin {

// Thread-safety: DaemonSetDeleted from any thread.
class UninstallWatch {
 public:
  // Watches the DaemonSet `name` in `ns` (list and watch with the field selector metadata.name,
  // which RBAC allows with resourceNames). Waits for nothing; a DaemonSet not seen yet counts as
  // present. `client` must outlive the watch.
  UninstallWatch(k8s::Client* client, const std::string& ns, const std::string& name);
  ~UninstallWatch();

  // True once the DaemonSet, seen before, was deleted or marked for deletion.
  bool DaemonSetDeleted() const;
  void Stop();

 private:
  std::string ref_;
  std::atomic<bool> deleted_{false};
  std::unique_ptr<k8s::Informer<k8s::DaemonSet>> informer_;
};

struct DriverFiles {
  std::string cdi_root;  // the CDI spec directory
  // The driver's spec files: "<prefix>*" for each (e.g. "k8s.gpu.nvidia.com-").
  std::vector<std::string> cdi_prefixes;
  std::string plugin_dir;  // <kubelet plugins dir>/<driver>: removed with everything in it
};

// Removes the driver's CDI spec files and its plugin directory (checkpoint, sockets, per-claim
// and per-domain directories). It does not follow symbolic links and does not descend into
// another mounted file system: such a mount point is left, with the directories above it. Returns
// what was left, each "path (why)"; empty when everything went (also when nothing was there).
std::vector<std::string> RemoveDriverFiles(const DriverFiles& files);

// The shutdown step of a plugin that saw its DaemonSet deleted: removes the driver's files
// (RemoveDriverFiles) unless a claim is still prepared, and logs what went, what was left or why
// nothing was removed. A claim still prepared (a pod on this node that still runs) keeps the
// checkpoint and the CDI specs, for a driver installed again to unprepare it; `holds_files` says
// which checkpoint records count as prepared. A checkpoint that cannot be read keeps everything.
// `checkpoint` may be null (a plugin that failed before opening it).
void RemoveFilesAfterUninstall(
    const checkpoint::Checkpoint* checkpoint, const DriverFiles& files,
    const std::function<bool(const checkpoint::PreparedClaim&)>& holds_files);

}  // namespace dra::kubeletplugin
