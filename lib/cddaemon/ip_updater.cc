#include "lib/cddaemon/ip_updater.h"

#include "absl/strings/str_cat.h"
#include "lib/common/atomic_file.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::cddaemon {

std::string IpNodesFile(const std::vector<k8s::ComputeDomainDaemonInfo>& daemons,
                        const std::string& clique_id) {
  std::string out;
  for (const k8s::ComputeDomainDaemonInfo& d : daemons) {
    if (d.clique_id == clique_id && !d.ip_address.empty()) {
      absl::StrAppend(&out, d.ip_address, "\n");
    }
  }
  return out;
}

absl::Status IpUpdater::Update(const std::vector<k8s::ComputeDomainDaemonInfo>& daemons) {
  std::string contents = IpNodesFile(daemons, clique_id_);
  if (last_ == contents) return absl::OkStatus();
  RETURN_IF_ERROR(WriteFileAtomically(nodes_file_, contents, 0644));
  DRA_INFO("wrote IMEX nodes file; restarting nvidia-imex", "path", nodes_file_, "nodes", contents);
  RETURN_IF_ERROR(imex_->Restart());
  last_ = contents;
  return absl::OkStatus();
}

}  // namespace dra::cddaemon
