#pragma once

// What the plugin publishes: one pool named after the node with one slice holding
//   channel-0  attributes type="channel", id=0
//   daemon-0   attributes type="daemon",  id=0
// (unqualified attribute names: CEL sees device.attributes['compute-domain.nvidia.com'].type).
// One of each per node, so the scheduler places at most one daemon claim and one channel claim
// per node. Channels 1..2047 exist but are not published: allocationMode All injects them all
// through channel-0. In hostManaged mode (`with_daemon` false) daemon-0 is left out: the host runs
// the IMEX daemon, and daemon claims are refused.

#include <string>

#include "lib/kubeletplugin/slice_publisher.h"

namespace dra::cdplugin {

kubeletplugin::DriverResources PublishedResources(const std::string& node_name,
                                                  bool with_daemon = true);

}  // namespace dra::cdplugin
