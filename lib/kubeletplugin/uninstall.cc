#include "lib/kubeletplugin/uninstall.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/common/log.h"

namespace dra::kubeletplugin {
namespace {

namespace fs = std::filesystem;

bool SameDevice(const std::string& path, dev_t dev) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && st.st_dev == dev;
}

// Depth first; a directory on another device (a mount point) is left with everything above it.
// Returns whether `path` is gone.
bool RemoveTree(const fs::path& path, dev_t dev, std::vector<std::string>* left) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) return true;
    left->push_back(absl::StrCat(path.string(), " (", ec.message(), ")"));
    return false;
  }
  if (fs::is_directory(st)) {
    if (!SameDevice(path.string(), dev)) {
      left->push_back(absl::StrCat(path.string(), " (a mount point; not descended into)"));
      return false;
    }
    bool all = true;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
      all = RemoveTree(it->path(), dev, left) && all;
    }
    if (ec) {
      left->push_back(absl::StrCat(path.string(), " (", ec.message(), ")"));
      return false;
    }
    if (!all) return false;
  }
  if (!fs::remove(path, ec) && ec) {
    left->push_back(absl::StrCat(path.string(), " (", ec.message(), ")"));
    return false;
  }
  return true;
}

}  // namespace

UninstallWatch::UninstallWatch(k8s::Client* client, const std::string& ns, const std::string& name)
    : ref_(absl::StrCat(ns, "/", name)),
      informer_(std::make_unique<k8s::Informer<k8s::DaemonSet>>(
          client, ns, k8s::ListOptions{.field_selector = absl::StrCat("metadata.name=", name)})) {
  auto deleting = [this](const k8s::Informer<k8s::DaemonSet>::Ptr& ds) {
    if (ds->metadata.deletion_timestamp.has_value() && !deleted_.exchange(true)) {
      DRA_INFO("the plugin's DaemonSet is being deleted: the driver's files go at shutdown",
               "daemonSet", ref_);
    }
  };
  informer_->AddHandlers(
      {.on_add = deleting,
       .on_update = [deleting](const auto&, const auto& ds) { deleting(ds); },
       .on_delete =
           [this](const auto&) {
             if (!deleted_.exchange(true)) {
               DRA_INFO("the plugin's DaemonSet was deleted: the driver's files go at shutdown",
                        "daemonSet", ref_);
             }
           }});
  informer_->Start();
}

UninstallWatch::~UninstallWatch() { Stop(); }

void UninstallWatch::Stop() {
  if (informer_) informer_->Stop();
}

bool UninstallWatch::DaemonSetDeleted() const { return deleted_.load(); }

std::vector<std::string> RemoveDriverFiles(const DriverFiles& files) {
  std::vector<std::string> left;
  std::error_code ec;
  if (!files.cdi_root.empty() && !files.cdi_prefixes.empty()) {
    for (fs::directory_iterator it(files.cdi_root, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (std::none_of(files.cdi_prefixes.begin(), files.cdi_prefixes.end(),
                       [&](const std::string& p) { return absl::StartsWith(name, p); })) {
        continue;
      }
      std::error_code rm;
      if (!fs::remove(it->path(), rm) && rm) {
        left.push_back(absl::StrCat(it->path().string(), " (", rm.message(), ")"));
      }
    }
    if (ec && ec != std::errc::no_such_file_or_directory) {
      left.push_back(absl::StrCat(files.cdi_root, " (", ec.message(), ")"));
    }
  }
  if (!files.plugin_dir.empty()) {
    struct stat st;
    if (::lstat(files.plugin_dir.c_str(), &st) == 0) {
      RemoveTree(files.plugin_dir, st.st_dev, &left);
    }
  }
  return left;
}

void RemoveFilesAfterUninstall(
    const checkpoint::Checkpoint* checkpoint, const DriverFiles& files,
    const std::function<bool(const checkpoint::PreparedClaim&)>& holds_files) {
  if (checkpoint != nullptr) {
    absl::StatusOr<checkpoint::ClaimMap> claims = checkpoint->List();
    if (!claims.ok()) {
      DRA_WARNING("the driver was uninstalled but its checkpoint cannot be read; its files stay",
                  "err", claims.status());
      return;
    }
    std::vector<std::string> in_use;
    for (const auto& [uid, c] : *claims) {
      if (holds_files(c))
        in_use.push_back(absl::StrCat(c.namespace_name, "/", c.name, " (", uid, ")"));
    }
    if (!in_use.empty()) {
      DRA_WARNING(
          "the driver was uninstalled with claims still prepared on this node; its checkpoint and "
          "CDI specs stay, for a driver installed again to unprepare them",
          "claims", absl::StrJoin(in_use, ", "));
      return;
    }
  }
  std::vector<std::string> left = RemoveDriverFiles(files);
  if (left.empty()) {
    DRA_INFO("the driver was uninstalled: removed its CDI specs and its plugin directory",
             "cdiRoot", files.cdi_root, "pluginDir", files.plugin_dir);
  } else {
    DRA_WARNING("the driver was uninstalled; some of its files could not be removed", "left",
                absl::StrJoin(left, ", "));
  }
}

}  // namespace dra::kubeletplugin
