#include "lib/gpuplugin/mps/mps_daemon.h"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/common/atomic_file.h"
#include "lib/common/json_access.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/gpuplugin/mps/mps_daemon_template.h"
#include "lib/gpuplugin/mps/mps_host.h"
#include "lib/k8s/objects_core.h"

namespace dra::gpu {
namespace {

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), static_cast<size_t>(len)));
}

// Letters, digits and '-' (UUIDs, claim UIDs), plus '/' for old MIG UUIDs ("MIG-GPU-x/1/0").
bool IsIdentifier(absl::string_view s, bool allow_slash) {
  if (s.empty() || s.size() > 128) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return absl::ascii_isalnum(c) || c == '-' || (allow_slash && c == '/');
  });
}

absl::Status Invalid(absl::string_view field, absl::string_view value, absl::string_view allowed) {
  return absl::InvalidArgumentError(absl::StrCat(
      "MPS control daemon: ", field, ": invalid value \"", absl::CEscape(value), "\": ", allowed));
}

absl::Status ValidateEnv(const MpsDaemonEnv& env) {
  if (env.client == nullptr) return absl::InvalidArgumentError("MPS control daemon: no API client");
  if (!env.set_compute_mode) {
    return absl::InvalidArgumentError("MPS control daemon: no compute mode setter");
  }
  if (env.node_name.empty()) return Invalid("node name", "", "must not be empty");
  if (env.ns.empty()) return Invalid("namespace", "", "must not be empty");
  if (env.image.empty()) return Invalid("image name (--image-name)", "", "must not be empty");
  if (env.plugin_data_dir.empty() || env.plugin_data_dir[0] != '/') {
    return Invalid("plugin data directory", env.plugin_data_dir, "must be an absolute path");
  }
  if (env.host_driver_root.empty() || env.host_driver_root[0] != '/') {
    return Invalid("host driver root", env.host_driver_root, "must be an absolute path");
  }
  return absl::OkStatus();
}

absl::Status ValidateGroup(const MpsDaemonGroup& g) {
  if (!IsIdentifier(g.claim_uid, false)) {
    return Invalid("claim UID", g.claim_uid, "letters, digits and '-' only");
  }
  if (g.device_uuids.empty()) {
    return absl::InvalidArgumentError("MPS control daemon: the group has no devices");
  }
  const std::set<std::string> devices(g.device_uuids.begin(), g.device_uuids.end());
  for (const std::string& u : g.device_uuids) {
    if (!IsIdentifier(u, true)) {
      return Invalid("device UUID", u, "letters, digits, '-' and '/' only");
    }
  }
  for (const std::string& u : g.full_gpu_uuids) {
    if (devices.count(u) == 0) {
      return Invalid("full GPU UUID", u, "must be one of the group's devices");
    }
  }
  if (g.config.default_active_thread_percentage) {
    const int64_t p = *g.config.default_active_thread_percentage;
    if (p < 0 || p > 100) {
      return Invalid("sharing.mpsConfig.defaultActiveThreadPercentage", absl::StrCat(p),
                     "must be in 0..100");
    }
  }
  for (const auto& [uuid, mib] : g.pinned_memory_limits_mib) {
    if (devices.count(uuid) == 0) {
      return Invalid("pinned memory limit device", uuid, "must be one of the group's devices");
    }
    if (mib < 1) {
      return Invalid(absl::StrCat("pinned memory limit of ", uuid), absl::StrCat(mib, "M"),
                     "must be at least 1 MiB");
    }
  }
  return absl::OkStatus();
}

std::string Subdir(const std::string& dir, absl::string_view name) {
  return absl::StrCat(dir, "/", name);
}

}  // namespace

MountOps MountOps::Real() {
  MountOps ops;
  ops.is_mount_point = [](const std::string& path) { return IsMountPoint(path); };
  ops.mount_tmpfs = MountTmpfs;
  ops.unmount = Unmount;
  return ops;
}

nlohmann::json MpsDaemonRecordToJson(const MpsDaemonRecord& record) {
  return {{"id", record.id}, {"namespace", record.ns}, {"fullGpuUUIDs", record.full_gpu_uuids}};
}

absl::StatusOr<MpsDaemonRecord> MpsDaemonRecordFromJson(const nlohmann::json& j) {
  MpsDaemonRecord r;
  if (!j.is_object() || !j.contains("id") || !j["id"].is_string() || !j.contains("namespace") ||
      !j["namespace"].is_string()) {
    return absl::InvalidArgumentError(
        "MPS daemon record: expected an object with string fields id and namespace");
  }
  r.id = j["id"].get<std::string>();
  r.ns = j["namespace"].get<std::string>();
  if (!IsIdentifier(r.id, false)) {
    return absl::InvalidArgumentError(
        absl::StrCat("MPS daemon record: id \"", absl::CEscape(r.id), "\" is not a daemon id"));
  }
  if (j.contains("fullGpuUUIDs")) {
    if (!j["fullGpuUUIDs"].is_array()) {
      return absl::InvalidArgumentError("MPS daemon record: fullGpuUUIDs: expected a list");
    }
    for (const nlohmann::json& u : j["fullGpuUUIDs"]) {
      if (!u.is_string()) {
        return absl::InvalidArgumentError("MPS daemon record: fullGpuUUIDs: expected strings");
      }
      r.full_gpu_uuids.push_back(u.get<std::string>());
    }
  }
  return r;
}

std::string MpsDaemonId(absl::string_view claim_uid, std::vector<std::string> device_uuids) {
  std::sort(device_uuids.begin(), device_uuids.end());
  return absl::StrCat(claim_uid, "-", Sha256Hex(absl::StrJoin(device_uuids, ",")).substr(0, 5));
}

std::string MpsDeploymentName(absl::string_view id) {
  return absl::StrCat("mps-control-daemon-", id);
}

std::string MpsDaemonDir(absl::string_view plugin_data_dir, absl::string_view id) {
  return absl::StrCat(plugin_data_dir, "/mps/", id);
}

absl::StatusOr<std::unique_ptr<MpsControlDaemon>> MpsControlDaemon::Create(MpsDaemonEnv env,
                                                                           MpsDaemonGroup group) {
  RETURN_IF_ERROR(ValidateEnv(env));
  RETURN_IF_ERROR(ValidateGroup(group));
  if (env.container_driver_root.empty()) env.container_driver_root = env.host_driver_root;
  std::string id = group.id.empty() ? MpsDaemonId(group.claim_uid, group.device_uuids) : group.id;
  if (!IsIdentifier(id, false)) return Invalid("MPS daemon id", id, "letters, digits and '-' only");
  return std::unique_ptr<MpsControlDaemon>(
      new MpsControlDaemon(std::move(env), std::move(group), std::move(id)));
}

MpsControlDaemon::MpsControlDaemon(MpsDaemonEnv env, MpsDaemonGroup group, std::string id)
    : env_(std::move(env)), group_(std::move(group)), id_(std::move(id)) {}

MpsDaemonRecord MpsControlDaemon::Record() const {
  return MpsDaemonRecord{.id = id_, .ns = env_.ns, .full_gpu_uuids = group_.full_gpu_uuids};
}

absl::StatusOr<nlohmann::json> MpsControlDaemon::RenderDeployment() const {
  const std::string dir = MpsDaemonDir(env_.plugin_data_dir, id_);
  MpsDeploymentParams p;
  p.name = DeploymentName();
  p.ns = env_.ns;
  p.id = id_;
  p.claim_uid = group_.claim_uid;
  p.node_name = env_.node_name;
  p.image = env_.image;
  p.image_pull_policy = env_.image_pull_policy;
  p.service_account = env_.service_account;
  p.image_pull_secrets = env_.image_pull_secrets;
  p.host_driver_root = env_.host_driver_root;
  p.shm_dir = Subdir(dir, "shm");
  p.pipe_dir = Subdir(dir, "pipe");
  p.log_dir = Subdir(dir, "log");
  std::error_code ec;
  p.shm_under_driver_root =
      std::filesystem::is_directory(absl::StrCat(env_.container_driver_root, "/dev/shm"), ec);
  p.visible_devices = group_.device_uuids;
  std::sort(p.visible_devices.begin(), p.visible_devices.end());
  p.feature_gates = env_.feature_gates;
  p.multi_user = group_.config.multi_user.value_or(false);
  p.active_thread_percentage = group_.config.default_active_thread_percentage;
  p.pinned_limits_mib = group_.pinned_memory_limits_mib;
  return RenderMpsDeployment(p);
}

absl::Status MpsControlDaemon::Start() {
  const std::string dir = MpsDaemonDir(env_.plugin_data_dir, id_);
  const std::string shm = Subdir(dir, "shm");
  auto annotate = [&](const absl::Status& s) {
    return Annotate(s, absl::StrCat("start MPS control daemon ", id_));
  };
  for (absl::string_view sub : {"shm", "pipe", "log"}) {
    const std::string path = Subdir(dir, sub);
    RETURN_IF_ERROR(annotate(MakeDirectories(path, 0755)));
    // MakeDirectories leaves existing directories alone and its mode is subject to the umask.
    if (::chmod(path.c_str(), 0755) != 0) {
      return annotate(dra::ErrnoToStatus(errno, absl::StrCat("chmod ", path)));
    }
  }
  absl::StatusOr<bool> mounted = env_.mounts.is_mount_point(shm);
  if (!mounted.ok()) return annotate(mounted.status());
  if (!*mounted) {
    RETURN_IF_ERROR(annotate(
        env_.mounts.mount_tmpfs("shm", shm, MpsShmMountOptions(MpsShmSize(env_.meminfo_path)))));
  }
  for (const std::string& uuid : group_.full_gpu_uuids) {
    RETURN_IF_ERROR(annotate(Annotate(env_.set_compute_mode(uuid, kComputeModeExclusiveProcess),
                                      absl::StrCat("set compute mode of ", uuid))));
  }
  ASSIGN_OR_RETURN(nlohmann::json deployment, RenderDeployment());
  absl::StatusOr<nlohmann::json> created =
      env_.client->Create(kDeploymentResource, env_.ns, deployment);
  if (!created.ok() && !absl::IsAlreadyExists(created.status())) {
    return annotate(Annotate(created.status(),
                             absl::StrCat("create Deployment ", env_.ns, "/", DeploymentName())));
  }
  DRA_INFO("MPS control daemon started", "claim", group_.claim_uid, "id", id_, "deployment",
           absl::StrCat(env_.ns, "/", DeploymentName()), "existed", !created.ok());
  return absl::OkStatus();
}

cdi::ContainerEdits MpsControlDaemon::ContainerEdits() const {
  const std::string dir = MpsDaemonDir(env_.plugin_data_dir, id_);
  const std::vector<std::string> options = {"rw", "nosuid", "nodev", "bind"};
  cdi::ContainerEdits edits;
  edits.env.push_back(absl::StrCat("CUDA_MPS_PIPE_DIRECTORY=", kMpsPipeDirInContainer));
  edits.mounts.push_back(cdi::Mount{.host_path = Subdir(dir, "shm"),
                                    .container_path = std::string(kMpsShmDirInContainer),
                                    .options = options});
  edits.mounts.push_back(cdi::Mount{.host_path = Subdir(dir, "pipe"),
                                    .container_path = std::string(kMpsPipeDirInContainer),
                                    .options = options});
  return edits;
}

absl::Status MpsControlDaemon::Stop() { return StopMpsControlDaemon(env_, Record()); }

namespace {

// Deletes the Deployment and waits until it and its pods are gone.
absl::Status DeleteDeploymentAndWait(const MpsDaemonEnv& env, const MpsDaemonRecord& record) {
  const std::string name = MpsDeploymentName(record.id);
  const std::string what = absl::StrCat("Deployment ", record.ns, "/", name);
  k8s::DeleteOptions del;
  del.propagation_policy = "Foreground";
  absl::Status s = env.client->Delete(kDeploymentResource, record.ns, name, del);
  if (!s.ok() && !absl::IsNotFound(s)) return Annotate(s, absl::StrCat("delete ", what));
  const absl::Time deadline = env.clock->Now() + env.stop_timeout;
  k8s::ListOptions list;
  list.label_selector = absl::StrCat("app=", name);
  while (true) {
    std::string remaining;
    absl::StatusOr<nlohmann::json> d = env.client->Get(kDeploymentResource, record.ns, name);
    if (d.ok()) {
      remaining = what;
    } else if (!absl::IsNotFound(d.status())) {
      return Annotate(d.status(), absl::StrCat("get ", what));
    }
    ASSIGN_OR_RETURN(nlohmann::json pods, env.client->List(k8s::Pod::kResource, record.ns, list));
    // Only names for the message: read leniently (lib/common/json_access.h).
    for (const nlohmann::json& pod : json_access::ArrayOrEmpty(pods, "items")) {
      absl::StrAppend(
          &remaining, remaining.empty() ? "" : ", ", "pod ",
          json_access::StringOr(json_access::MemberOrNull(pod, "metadata"), "name", "?"));
    }
    if (remaining.empty()) return absl::OkStatus();
    if (env.clock->Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("delete ", what, ": still present after ",
                                                      absl::FormatDuration(env.stop_timeout), ": ",
                                                      remaining));
    }
    env.clock->SleepFor(env.stop_poll_interval);
  }
}

}  // namespace

absl::Status StopMpsControlDaemon(const MpsDaemonEnv& env, const MpsDaemonRecord& record) {
  if (!IsIdentifier(record.id, false)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stop MPS control daemon: invalid id \"", absl::CEscape(record.id), "\""));
  }
  const std::string dir = MpsDaemonDir(env.plugin_data_dir, record.id);
  auto annotate = [&](const absl::Status& s) {
    return Annotate(s, absl::StrCat("stop MPS control daemon ", record.id));
  };
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    if (ec) return annotate(absl::InternalError(absl::StrCat("stat ", dir, ": ", ec.message())));
    return absl::OkStatus();  // never started, or fully stopped
  }
  RETURN_IF_ERROR(annotate(DeleteDeploymentAndWait(env, record)));
  for (const std::string& uuid : record.full_gpu_uuids) {
    RETURN_IF_ERROR(annotate(Annotate(env.set_compute_mode(uuid, kComputeModeDefault),
                                      absl::StrCat("reset compute mode of ", uuid))));
  }
  const std::string shm = Subdir(dir, "shm");
  // Mounted more than once only after outside interference; each round peels one layer.
  for (int i = 0;; ++i) {
    absl::StatusOr<bool> mounted = env.mounts.is_mount_point(shm);
    if (!mounted.ok()) return annotate(mounted.status());
    if (!*mounted) break;
    if (i == 8) {
      return annotate(absl::InternalError(absl::StrCat(shm, " is still mounted after 8 unmounts")));
    }
    RETURN_IF_ERROR(annotate(env.mounts.unmount(shm)));
  }
  std::filesystem::remove_all(dir, ec);
  if (ec) {
    return annotate(absl::InternalError(absl::StrCat("remove ", dir, ": ", ec.message())));
  }
  DRA_INFO("MPS control daemon stopped", "id", record.id, "deployment",
           absl::StrCat(record.ns, "/", MpsDeploymentName(record.id)));
  return absl::OkStatus();
}

}  // namespace dra::gpu
