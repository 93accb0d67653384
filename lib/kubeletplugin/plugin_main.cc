// RunPluginMain (plugin_host.h): what both kubelet plugin binaries' main() do.

#include <cstdio>
#include <string>

#include "lib/common/feature_gates.h"
#include "lib/common/flags.h"
#include "lib/common/log.h"
#include "lib/common/signals.h"
#include "lib/common/stack_dump.h"
#include "lib/kubeletplugin/plugin_host.h"

namespace dra::kubeletplugin {

int RunPluginMain(int argc, char** argv, PluginHostConfig* config, const PluginMainSpec& spec) {
  // Names in the SIGUSR2 stack dump (lib/common/stack_dump.h); before any thread starts.
  InitializeStackDumpSymbolizer(argv[0]);
  // Signals are blocked before any thread starts so that only the handler thread receives them.
  absl::StatusOr<std::unique_ptr<SignalHandler>> signals = SignalHandler::Start();
  if (!signals.ok()) {
    std::fprintf(stderr, "%s: %s\n", spec.program.c_str(),
                 std::string(signals.status().message()).c_str());
    return 1;
  }
  FeatureGates gates;
  if (absl::Status s = spec.register_gates(gates); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", spec.program.c_str(), std::string(s.message()).c_str());
    return 1;
  }
  config->gates = &gates;
  Flags flags(spec.program, spec.description);
  AddPluginHostFlags(flags, config, spec.help);
  if (spec.add_flags) spec.add_flags(flags);
  flags.AddLoggingFlags();
  flags.AddFeatureGatesFlag(&gates);
  flags.SetVersion(spec.version);
  if (spec.metrics_markdown) flags.SetMetricsReference(spec.metrics_markdown);
  if (spec.steps_markdown) flags.SetStepsReference(spec.steps_markdown);
  flags.ParseOrExit(argc, argv);
  flags.LogStartupConfig(&gates);

  absl::Status s = spec.run(signals->get());
  if (!s.ok()) {
    DRA_ERROR(spec.program + " failed", "err", s);
    return 1;
  }
  return 0;
}

}  // namespace dra::kubeletplugin
