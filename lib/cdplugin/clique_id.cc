#include "lib/cdplugin/clique_id.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/common/status.h"
#include "lib/nvml/errors.h"

namespace dra::cdplugin {
namespace {

std::string Describe(const std::map<std::string, std::vector<std::string>>& by_value) {
  std::vector<std::string> parts;
  for (const auto& [value, gpus] : by_value) {
    parts.push_back(absl::StrCat(value, " (", absl::StrJoin(gpus, ", "), ")"));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace

absl::StatusOr<std::string> CliqueIdFromFabric(const std::vector<GpuFabric>& gpus, bool strict) {
  std::map<std::string, std::vector<std::string>> clusters;  // cluster UUID -> GPUs
  std::map<std::string, std::vector<std::string>> cliques;   // clique ID -> GPUs
  for (const GpuFabric& g : gpus) {
    if (!g.fabric.ok()) {
      if (nvml::IsNotSupported(g.fabric.status())) continue;
      return Annotate(g.fabric.status(), absl::StrCat("GPU ", g.gpu, ": NVLink fabric info"));
    }
    const nvml::FabricInfo& f = *g.fabric;
    if (f.state == nvml::FabricState::kNotSupported) continue;
    if (f.state != nvml::FabricState::kCompleted) {
      if (!strict) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "GPU ", g.gpu, ": NVLink fabric not attached (fabric state ", static_cast<int>(f.state),
          ", want 3 = completed); refusing to start (the feature gate CrashOnNVLinkFabricErrors "
          "is on: fix the fabric manager / NVLink setup, or turn the gate off to run without a "
          "clique)"));
    }
    if (f.status != 0) {
      if (!strict) continue;
      return absl::FailedPreconditionError(
          absl::StrCat("GPU ", g.gpu, ": NVLink fabric registration error (NVML status ", f.status,
                       "); refusing to start"));
    }
    if (f.ClusterUuidIsZero()) continue;
    clusters[f.ClusterUuidString()].push_back(g.gpu);
    cliques[absl::StrCat(f.clique_id)].push_back(g.gpu);
  }
  if (clusters.empty()) return std::string();
  if (clusters.size() != 1 || cliques.size() != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "unexpected number of unique ClusterUUIDs/CliqueIDs on this node: want one of each; "
        "cluster UUIDs: ",
        Describe(clusters), "; clique IDs: ", Describe(cliques)));
  }
  return absl::StrCat(clusters.begin()->first, ".", cliques.begin()->first);
}

absl::StatusOr<std::string> DiscoverCliqueId(const nvml::Nvml& nvml, bool strict) {
  ASSIGN_OR_RETURN(nvml::Session session, nvml.Open());
  ASSIGN_OR_RETURN(std::vector<nvml::Device> devices, session.Devices());
  std::vector<GpuFabric> gpus;
  for (size_t i = 0; i < devices.size(); ++i) {
    absl::StatusOr<std::string> uuid = devices[i].Uuid();
    gpus.push_back({uuid.ok() ? *uuid : absl::StrCat("index ", i), devices[i].Fabric()});
  }
  return CliqueIdFromFabric(gpus, strict);
}

}  // namespace dra::cdplugin
