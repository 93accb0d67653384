#pragma once

// The three objects the controller creates for a ComputeDomain, rendered from the templates in
// templates.cc (compiled in): the IMEX daemons' DaemonSet and ResourceClaimTemplate in the driver
// namespace and the workload ResourceClaimTemplate in the domain's namespace (contents: the
// templates themselves, and render_test.cc). All carry the label and finalizer
// resource.nvidia.com/computeDomain=<domain UID> and no owner references (deletion is the
// controller's work, through the domain's finalizer).
//
// Values are substituted as JSON texts into {{KEY}} placeholders, so a value can never change the
// document's structure.

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/cdcontroller/config.h"
#include "lib/k8s/objects_compute_domain.h"
#include "nlohmann/json.hpp"

namespace dra::cdcontroller {

inline constexpr absl::string_view kDaemonDeviceClass = "compute-domain-daemon.nvidia.com";
inline constexpr absl::string_view kChannelDeviceClass =
    "compute-domain-default-channel.nvidia.com";
inline constexpr absl::string_view kDaemonServiceAccount = "compute-domain-daemon-service-account";
inline constexpr absl::string_view kDaemonContainer = "compute-domain-daemon";
inline constexpr absl::string_view kDaemonPodClaim = "compute-domain-daemon";

// "computedomain-daemon-<uid>": the name of the DaemonSet and of the daemon RCT.
std::string DaemonObjectName(absl::string_view cd_uid);

// Substitutes `values` (each a JSON text) for "{{KEY}}" in `text`. InvalidArgument names a
// placeholder without a value or an unterminated one.
absl::StatusOr<std::string> SubstitutePlaceholders(
    absl::string_view text, const std::map<std::string, std::string>& values);

// The objects, as the JSON sent to the API server. Errors (Internal) only for a broken template.
absl::StatusOr<nlohmann::json> RenderDaemonSet(const k8s::ComputeDomain& cd,
                                               const ControllerConfig& config);
absl::StatusOr<nlohmann::json> RenderDaemonClaimTemplate(const k8s::ComputeDomain& cd,
                                                         const ControllerConfig& config);
// In hostManaged mode the allocation mode is always Single (the host's IMEX owns the channels).
absl::StatusOr<nlohmann::json> RenderWorkloadClaimTemplate(const k8s::ComputeDomain& cd,
                                                           const ControllerConfig& config);

// The compiled-in templates, for tests.
absl::string_view DaemonSetTemplate();
absl::string_view DaemonClaimTemplateTemplate();
absl::string_view WorkloadClaimTemplateTemplate();

}  // namespace dra::cdcontroller
