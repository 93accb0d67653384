#include "lib/gpuplugin/mps/mps_sharing.h"

#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/api/errors.h"
#include "lib/api/mps_limits.h"
#include "lib/common/status.h"

namespace dra::gpu {
namespace {

constexpr char kDynamicMigPrefix[] = "dynamic-mig/";

class RealDaemon final : public MpsDaemon {
 public:
  explicit RealDaemon(std::unique_ptr<MpsControlDaemon> daemon) : daemon_(std::move(daemon)) {}
  MpsDaemonRecord Record() const override { return daemon_->Record(); }
  absl::Status Start() override { return daemon_->Start(); }
  absl::Status AssertReady(absl::Time deadline) override { return daemon_->AssertReady(deadline); }
  cdi::ContainerEdits ContainerEdits() const override { return daemon_->ContainerEdits(); }

 private:
  const std::unique_ptr<MpsControlDaemon> daemon_;
};

class RealDaemons final : public MpsDaemons {
 public:
  explicit RealDaemons(MpsDaemonEnv env) : env_(std::move(env)) {}
  absl::StatusOr<std::unique_ptr<MpsDaemon>> Create(MpsDaemonGroup group) const override {
    ASSIGN_OR_RETURN(auto daemon, MpsControlDaemon::Create(env_, std::move(group)));
    return std::unique_ptr<MpsDaemon>(new RealDaemon(std::move(daemon)));
  }
  absl::Status Stop(const MpsDaemonRecord& record) const override {
    return StopMpsControlDaemon(env_, record);
  }

 private:
  const MpsDaemonEnv env_;
};

// Volta, the first architecture whose MPS serves several users (nvidia-cuda-mps-control -M).
constexpr std::pair<int, int> kMultiUserMinComputeCapability = {7, 0};

}  // namespace

std::unique_ptr<MpsDaemons> MpsDaemons::Real(MpsDaemonEnv env) {
  return std::make_unique<RealDaemons>(std::move(env));
}

std::optional<std::pair<int, int>> ComputeCapabilityOf(const AllocatableDevice& device) {
  auto it = device.published.attributes.find("cudaComputeCapability");
  if (it == device.published.attributes.end() || !it->second.version_value) return std::nullopt;
  std::vector<std::string> parts = absl::StrSplit(*it->second.version_value, '.');
  int major = 0, minor = 0;
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &major) ||
      !absl::SimpleAtoi(parts[1], &minor)) {
    return std::nullopt;
  }
  return std::make_pair(major, minor);
}

std::optional<api::MpsConfig> MpsConfigOf(const api::Config& config) {
  if (const auto* g = std::get_if<api::GpuConfig>(&config)) {
    if (g->sharing && g->sharing->strategy == api::SharingStrategy::kMps) {
      return g->sharing->mps_config.value_or(api::MpsConfig{});
    }
  } else if (const auto* m = std::get_if<api::MigDeviceConfig>(&config)) {
    if (m->sharing && m->sharing->strategy == api::SharingStrategy::kMps) {
      return m->sharing->mps_config.value_or(api::MpsConfig{});
    }
  }
  return std::nullopt;
}

std::string DynamicMigUuidPlaceholder(const std::string& device_name) {
  return absl::StrCat(kDynamicMigPrefix, device_name);
}

absl::StatusOr<MpsDaemonGroup> WithCreatedMigUuids(
    MpsDaemonGroup planned, const std::map<std::string, std::string>& created) {
  if (planned.id.empty()) planned.id = MpsDaemonId(planned.claim_uid, planned.device_uuids);
  for (std::string& uuid : planned.device_uuids) {
    if (!absl::StartsWith(uuid, kDynamicMigPrefix)) continue;
    const std::string device = uuid.substr(std::strlen(kDynamicMigPrefix));
    auto it = created.find(device);
    if (it == created.end() || it->second.empty()) {
      return absl::NotFoundError(
          absl::StrCat("MPS daemon ", planned.id, ": MIG device ", device, " was not created"));
    }
    uuid = it->second;
  }
  ASSIGN_OR_RETURN(planned.pinned_memory_limits_mib,
                   api::ResolvePinnedMemoryLimits(planned.config, planned.device_uuids));
  return planned;
}

absl::StatusOr<MpsDaemonGroup> MpsGroupFor(const std::string& claim_uid,
                                           const api::MpsConfig& config,
                                           const std::vector<const AllocatableDevice*>& devices) {
  MpsDaemonGroup group;
  group.claim_uid = claim_uid;
  group.config = config;
  std::set<std::string> seen;
  bool dynamic = false;
  for (const AllocatableDevice* d : devices) {
    const bool dynamic_mig = d->mig && d->mig->dynamic;
    dynamic |= dynamic_mig;
    const std::string uuid = dynamic_mig ? DynamicMigUuidPlaceholder(d->name)
                             : d->mig    ? d->mig->uuid
                                         : d->gpu.uuid;
    if (!seen.insert(uuid).second) continue;
    group.device_uuids.push_back(uuid);
    if (d->type == DeviceType::kGpu) group.full_gpu_uuids.push_back(uuid);
    if (config.multi_user.value_or(false)) {
      // MIG devices carry their parent's capability; every MIG-capable GPU is past Volta.
      const std::optional<std::pair<int, int>> cc = ComputeCapabilityOf(*d);
      if (!cc || *cc < kMultiUserMinComputeCapability) {
        return api::ConfigError(
            absl::StrCat(api::kMpsConfigPath, ".multiUser"),
            absl::StrCat("device ", d->name, " (", uuid, ") has compute capability ",
                         cc ? absl::StrCat(cc->first, ".", cc->second) : "unknown",
                         "; multi-user MPS needs 7.0 (Volta) or newer"));
      }
    }
  }
  ASSIGN_OR_RETURN(group.pinned_memory_limits_mib,
                   api::ResolvePinnedMemoryLimits(config, group.device_uuids));
  if (dynamic) group.id = MpsDaemonId(claim_uid, group.device_uuids);
  return group;
}

}  // namespace dra::gpu
