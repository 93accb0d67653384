#include "lib/cddaemon/imex_files.h"

#include <algorithm>
#include <cstddef>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "lib/common/atomic_file.h"
#include "lib/common/status.h"

namespace dra::cddaemon {

std::string DnsName(int64_t index) { return absl::StrFormat("compute-domain-daemon-%04d", index); }

std::string ConfigPath(const std::string& dir) { return absl::StrCat(dir, "/", kConfigName); }

absl::StatusOr<std::string> RenderImexConfig(absl::string_view tmpl, absl::string_view cmd_bind_ip,
                                             absl::string_view nodes_config_path) {
  std::string out = absl::StrReplaceAll(
      tmpl, {{kCmdBindIPPlaceholder, cmd_bind_ip}, {kNodesPathPlaceholder, nodes_config_path}});
  // A placeholder left over (or a value that itself holds "{{") is refused.
  size_t pos = out.find("{{");
  if (pos != std::string::npos) {
    int line = 1 + static_cast<int>(std::count(
                       out.begin(), out.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
    size_t end = out.find('\n', pos);
    return absl::InvalidArgumentError(absl::StrCat(
        kConfigTemplateName, " line ", line, ": unknown placeholder in \"",
        out.substr(pos, end == std::string::npos ? std::string::npos : end - pos), "\"; only ",
        kCmdBindIPPlaceholder, " and ", kNodesPathPlaceholder, " are allowed"));
  }
  return out;
}

absl::StatusOr<std::string> StaticNodesFile(int max_nodes) {
  if (max_nodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max-nodes-per-imex-domain (env MAX_NODES_PER_IMEX_DOMAIN) is ", max_nodes,
                     "; it must be at least 1"));
  }
  std::string out;
  for (int i = 0; i < max_nodes; ++i) absl::StrAppend(&out, DnsName(i), "\n");
  return out;
}

absl::Status WriteImexConfig(const std::string& dir, absl::string_view pod_ip) {
  const std::string tmpl_path = absl::StrCat(dir, "/", kConfigTemplateName);
  ASSIGN_OR_RETURN(std::string tmpl, ReadFile(tmpl_path));
  absl::StatusOr<std::string> cfg =
      RenderImexConfig(tmpl, pod_ip, absl::StrCat(dir, "/", kNodesConfigName));
  if (!cfg.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("render ", tmpl_path, ": ", cfg.status().message()));
  }
  RETURN_IF_ERROR(MakeDirectories(dir, 0755));
  return WriteFileAtomically(ConfigPath(dir), *cfg, 0644);
}

absl::Status WriteStaticNodesFile(const std::string& dir, int max_nodes) {
  ASSIGN_OR_RETURN(std::string contents, StaticNodesFile(max_nodes));
  return WriteFileAtomically(absl::StrCat(dir, "/", kNodesConfigName), contents, 0644);
}

}  // namespace dra::cddaemon
