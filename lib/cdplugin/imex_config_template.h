#pragma once

// The IMEX daemon config template the plugin writes as <data dir>/domains/<cdUID>/imexd.cfg.tmpl
// at daemon-claim prepare (docs/compute-domains.md "IMEX config"). The daemon renders it to
// /imexd/imexd.cfg, replacing exactly the two placeholders
//   {{ .IMEXCmdBindInterfaceIP }}     its pod IP
//   {{ .IMEXDaemonNodesConfigPath }}  /imexd/nodes.cfg

#include "absl/strings/string_view.h"

namespace dra::cdplugin {

absl::string_view ImexConfigTemplate();

}  // namespace dra::cdplugin
