#pragma once

// The compute-domain-controller process after flag parsing: API client, metrics endpoint, leader
// election (when enabled) and the Controller, until a shutdown signal or the loss of leadership.

#include "absl/status/status.h"
#include "lib/cdcontroller/config.h"
#include "lib/common/feature_gates.h"
#include "lib/common/signals.h"

namespace dra::cdcontroller {

// Returns OK after a shutdown signal (the lease, when held, is released after the controller
// stopped, so that a standby takes over at once); Aborted when leadership was lost (the process
// should exit non-zero and be restarted); other errors for bad configuration or startup
// failures.
absl::Status RunController(ProcessOptions options, const FeatureGates& gates,
                           SignalHandler* signals);

}  // namespace dra::cdcontroller
