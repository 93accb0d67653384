#pragma once

// The files the daemon writes for nvidia-imex in its config directory (/imexd in the pod):
// imexd.cfg rendered from the kubelet plugin's imexd.cfg.tmpl, and the static nodes.cfg of DNS
// names (docs/compute-domains.md "The IMEX daemon").

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dra::cddaemon {

inline constexpr absl::string_view kConfigTemplateName = "imexd.cfg.tmpl";
inline constexpr absl::string_view kConfigName = "imexd.cfg";
inline constexpr absl::string_view kNodesConfigName = "nodes.cfg";
// The two placeholders of the template, spelled exactly as the plugin writes them.
inline constexpr absl::string_view kCmdBindIPPlaceholder = "{{ .IMEXCmdBindInterfaceIP }}";
inline constexpr absl::string_view kNodesPathPlaceholder = "{{ .IMEXDaemonNodesConfigPath }}";

// "compute-domain-daemon-%04d".
std::string DnsName(int64_t index);

// Replaces every occurrence of the two placeholders. Any other "{{" is an error naming the line
// and what is allowed (the template is ours; a foreign placeholder means a version mismatch).
absl::StatusOr<std::string> RenderImexConfig(absl::string_view tmpl, absl::string_view cmd_bind_ip,
                                             absl::string_view nodes_config_path);

// One DNS name a line for indices 0 .. max_nodes-1. InvalidArgument when max_nodes < 1.
absl::StatusOr<std::string> StaticNodesFile(int max_nodes);

// Reads <dir>/imexd.cfg.tmpl, writes <dir>/imexd.cfg (0644, atomically) with the command
// interface bound to `pod_ip` and the nodes file <dir>/nodes.cfg.
absl::Status WriteImexConfig(const std::string& dir, absl::string_view pod_ip);
// Writes <dir>/nodes.cfg (0644, atomically).
absl::Status WriteStaticNodesFile(const std::string& dir, int max_nodes);

std::string ConfigPath(const std::string& dir);

}  // namespace dra::cddaemon
