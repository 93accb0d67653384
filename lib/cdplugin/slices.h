#pragma once

// What the plugin publishes: one pool named after the node with one slice holding
//   channel-0  attributes type="channel", id=0
//   daemon-0   attributes type="daemon",  id=0
// (unqualified attribute names: CEL sees device.attributes['compute-domain.nvidia.com'].type).
// One of each per node, so the scheduler places at most one daemon claim and one channel claim
// per node. Channels 1..2047 exist but are not published: allocationMode All injects them all
// through channel-0. In hostManaged mode (`with_daemon` false) daemon-0 is left out: the host runs
// the IMEX daemon, and daemon claims are refused.
//
// With `binding_conditions` channel-0 carries the device binding conditions (KEP-5007)
// bindingConditions [IMEXDaemonReady] and bindingFailureConditions [IMEXDaemonFailed]: the
// scheduler then binds a workload pod only once the controller reported its node's IMEX daemon
// Ready on the claim (docs/compute-domains.md "Binding conditions"). daemon-0 never carries them
// (nothing would report them: the daemon is what the workload waits for).

#include <string>

#include "lib/kubeletplugin/slice_publisher.h"

namespace dra::cdplugin {

kubeletplugin::DriverResources PublishedResources(const std::string& node_name,
                                                  bool with_daemon = true,
                                                  bool binding_conditions = false);

}  // namespace dra::cdplugin
