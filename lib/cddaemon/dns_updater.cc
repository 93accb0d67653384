#include "lib/cddaemon/dns_updater.h"

#include <csignal>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::cddaemon {

absl::Status DnsUpdater::Update(const std::vector<k8s::ComputeDomainDaemonInfo>& daemons) {
  ASSIGN_OR_RETURN(DnsMappings mappings, BuildDnsMappings(daemons, clique_id_, max_nodes_));
  const bool changed = !last_.has_value() || *last_ != mappings;
  if (changed) {
    RETURN_IF_ERROR(UpdateHostsFile(hosts_file_, mappings, &hosts_in_place_));
    last_ = mappings;
    DRA_INFO("updated DNS name mappings", "hosts", hosts_file_, "mappings",
             absl::StrJoin(mappings, ", ", absl::PairFormatter("=")));
  }
  bool fresh = false;
  RETURN_IF_ERROR(imex_->EnsureStarted(&fresh));
  if (changed && !fresh) {
    // Only logged on failure: a restarting child reads the new hosts file anyway.
    if (absl::Status s = imex_->Signal(SIGUSR1); !s.ok()) {
      DRA_WARNING("could not signal nvidia-imex to re-resolve its peers", "err", s);
    } else {
      DRA_VLOG(1, "sent SIGUSR1 to nvidia-imex");
    }
  }
  return absl::OkStatus();
}

}  // namespace dra::cddaemon
