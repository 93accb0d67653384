#pragma once

// IP mode's reaction to a new daemon list (IMEXDaemonsWithDNSNames=false; spec "IP mode"): the
// nodes file lists the same-clique daemons' IPs, one a line, in list order, and nvidia-imex is
// restarted whenever that list changes (it reads the file only at startup).
//
// Thread-compatible: called from the registrar's worker thread only.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/cddaemon/imex_process.h"
#include "lib/k8s/objects_compute_domain.h"

namespace dra::cddaemon {

// "<ip>\n" for each daemon of `clique_id` with an address, in list order.
std::string IpNodesFile(const std::vector<k8s::ComputeDomainDaemonInfo>& daemons,
                        const std::string& clique_id);

class IpUpdater {
 public:
  IpUpdater(std::string nodes_file, std::string clique_id, ImexProcess* imex)
      : nodes_file_(std::move(nodes_file)), clique_id_(std::move(clique_id)), imex_(imex) {}

  absl::Status Update(const std::vector<k8s::ComputeDomainDaemonInfo>& daemons);

 private:
  const std::string nodes_file_;
  const std::string clique_id_;
  ImexProcess* const imex_;
  std::optional<std::string> last_;
};

}  // namespace dra::cddaemon
