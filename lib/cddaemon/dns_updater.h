#pragma once

// DNS-name mode's reaction to a new daemon list (spec "DNS-name mode"): map the same-clique
// daemons' IPs to their DNS names in the hosts file, make sure nvidia-imex runs, and SIGUSR1 it
// when the mapping changed after it had started, so that it re-resolves its peers. nvidia-imex is
// never restarted for peer changes.
//
// Thread-compatible: called from the registrar's worker thread only.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/cddaemon/hosts_file.h"
#include "lib/cddaemon/imex_process.h"
#include "lib/k8s/objects_compute_domain.h"

namespace dra::cddaemon {

class DnsUpdater {
 public:
  DnsUpdater(std::string hosts_file, std::string clique_id, int max_nodes, ImexProcess* imex)
      : hosts_file_(std::move(hosts_file)),
        clique_id_(std::move(clique_id)),
        max_nodes_(max_nodes),
        imex_(imex) {}

  absl::Status Update(const std::vector<k8s::ComputeDomainDaemonInfo>& daemons);

 private:
  const std::string hosts_file_;
  const std::string clique_id_;
  const int max_nodes_;
  ImexProcess* const imex_;
  std::optional<DnsMappings> last_;
  bool hosts_in_place_ = false;  // the hosts file turned out to be a mount point  // what the hosts
                                 // file holds; unset before the first write
};

}  // namespace dra::cddaemon
