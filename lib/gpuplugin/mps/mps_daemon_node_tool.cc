// Test helper for mps_daemon_integration_test: runs MpsControlDaemon's Start + AssertReady, or
// StopMpsControlDaemon, the way the kubelet plugin does. The test runs it through
// `nsenter --mount=<node's pin>` so that the directories, the tmpfs and the Deployment's hostPath
// volumes are those of the node, as for the plugin's pod (the Helm chart's DaemonSet, whose
// kubelet plugins folder propagates its mounts to the node).
//
//   mps_daemon_node_tool start --kubeconfig=F --node=N --namespace=NS --image=I --driver-root=D
//       --plugin-data-dir=P --claim-uid=U --gpu=UUID... [--mig=UUID...] [--threads=N]
//       [--pinned=UUID=MiB...] [--multi-user] [--ready-attempts=N]
//     prints the daemon record (JSON) on the last line of stdout
//   mps_daemon_node_tool stop --kubeconfig=F --driver-root=D --plugin-data-dir=P --record=JSON
//
// The compute mode is set with the driver root's nvidia-smi (LD_PRELOAD of its libnvidia-ml).

#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "lib/api/types.h"
#include "lib/gpuplugin/mps/mps_daemon.h"
#include "lib/k8s/client.h"
#include "lib/k8s/rest_config.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace {

using dra::gpu::MpsControlDaemon;

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: mps_daemon_node_tool start|stop --flag=value...\n");
    return 2;
  }
  const std::string command = argv[1];
  std::map<std::string, std::string> flags;
  std::vector<std::string> gpus, migs, pinned;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) return Fail(absl::InvalidArgumentError("bad argument " + a));
    a = a.substr(2);
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq);
    const std::string value = eq == std::string::npos ? "true" : a.substr(eq + 1);
    if (key == "gpu") {
      gpus.push_back(value);
    } else if (key == "mig") {
      migs.push_back(value);
    } else if (key == "pinned") {
      pinned.push_back(value);
    } else {
      flags[key] = value;
    }
  }
  absl::StatusOr<dra::k8s::RestConfig> config = dra::k8s::LoadKubeconfig(flags["kubeconfig"]);
  if (!config.ok()) return Fail(config.status());
  absl::StatusOr<std::unique_ptr<dra::k8s::Client>> client = dra::k8s::Client::Create(*config);
  if (!client.ok()) return Fail(client.status());

  const std::string root = flags["driver-root"];
  dra::gpu::MpsDaemonEnv env;
  env.node_name = flags["node"];
  env.ns = flags["namespace"];
  env.image = flags["image"];
  env.image_pull_policy = "Never";  // the local nodes have no registry
  env.host_driver_root = root;
  env.plugin_data_dir = flags["plugin-data-dir"];
  env.feature_gates = "MPSSupport=true";
  env.client = client->get();
  env.set_compute_mode = [root](const std::string& uuid, absl::string_view mode) -> absl::Status {
    absl::StatusOr<dra::testing::CommandResult> r = dra::testing::RunCommand(
        {root + "/usr/bin/nvidia-smi", "-i", uuid, "-c", std::string(mode)},
        {{"LD_PRELOAD", root + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"}});
    if (!r.ok()) return r.status();
    if (r->exit_code != 0) {
      return absl::InternalError(absl::StrCat("nvidia-smi -i ", uuid, " -c ", mode, ": exit ",
                                              r->exit_code, ": ", r->output));
    }
    return absl::OkStatus();
  };
  if (flags.count("ready-attempts") != 0 &&
      !absl::SimpleAtoi(flags["ready-attempts"], &env.ready_attempts)) {
    return Fail(absl::InvalidArgumentError("--ready-attempts: not a number"));
  }

  if (command == "stop") {
    nlohmann::json j = nlohmann::json::parse(flags["record"], nullptr, false);
    absl::StatusOr<dra::gpu::MpsDaemonRecord> record = dra::gpu::MpsDaemonRecordFromJson(j);
    if (!record.ok()) return Fail(record.status());
    if (absl::Status s = dra::gpu::StopMpsControlDaemon(env, *record); !s.ok()) return Fail(s);
    std::printf("stopped %s\n", record->id.c_str());
    return 0;
  }
  if (command != "start") return Fail(absl::InvalidArgumentError("unknown command " + command));

  dra::gpu::MpsDaemonGroup group;
  group.claim_uid = flags["claim-uid"];
  group.full_gpu_uuids = gpus;
  group.device_uuids = gpus;
  group.device_uuids.insert(group.device_uuids.end(), migs.begin(), migs.end());
  if (flags.count("threads") != 0) {
    int64_t threads = 0;
    if (!absl::SimpleAtoi(flags["threads"], &threads)) {
      return Fail(absl::InvalidArgumentError("--threads: not a number"));
    }
    group.config.default_active_thread_percentage = threads;
  }
  if (flags.count("multi-user") != 0) group.config.multi_user = true;
  for (const std::string& p : pinned) {
    const size_t eq = p.rfind('=');
    int64_t mib = 0;
    if (eq == std::string::npos || !absl::SimpleAtoi(p.substr(eq + 1), &mib)) {
      return Fail(absl::InvalidArgumentError("--pinned: want UUID=MiB, got " + p));
    }
    group.pinned_memory_limits_mib[p.substr(0, eq)] = mib;
  }
  absl::StatusOr<std::unique_ptr<MpsControlDaemon>> daemon =
      MpsControlDaemon::Create(env, std::move(group));
  if (!daemon.ok()) return Fail(daemon.status());
  if (absl::Status s = (*daemon)->Start(); !s.ok()) return Fail(s);
  if (absl::Status s = (*daemon)->AssertReady(absl::Now() + absl::Minutes(3)); !s.ok()) {
    return Fail(s);
  }
  std::printf("%s\n", dra::gpu::MpsDaemonRecordToJson((*daemon)->Record()).dump().c_str());
  return 0;
}
