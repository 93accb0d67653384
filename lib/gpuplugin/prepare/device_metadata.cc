#include "lib/gpuplugin/prepare/device_metadata.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/cdi/spec.h"
#include "lib/cdi/validate.h"
#include "lib/common/atomic_file.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::gpu {
namespace {

constexpr char kContainerRoot[] = "/var/run/kubernetes.io/dra-device-attributes";
constexpr char kContainerFile[] = "gpu.nvidia.com-metadata.json";

std::string CdiName(const std::string& claim_uid, const std::string& request) {
  return absl::StrCat(claim_uid, "_", request);
}

// Removes `path` (a file or an empty directory); a missing one is success, a non-empty directory
// is left (another request's files are still there).
absl::Status RemovePath(const std::string& path, bool directory) {
  const int rc = directory ? ::rmdir(path.c_str()) : ::unlink(path.c_str());
  // ENOTDIR: a path element is not a directory, so the file cannot be there either.
  if (rc == 0 || errno == ENOENT || errno == ENOTDIR ||
      (directory && (errno == ENOTEMPTY || errno == EEXIST))) {
    return absl::OkStatus();
  }
  return absl::ErrnoToStatus(errno, absl::StrCat("remove ", path));
}

// The undo data's string member `key`.
absl::StatusOr<std::string> UndoString(const nlohmann::json& undo, const char* key) {
  auto it = undo.find(key);
  // Each becomes a path element: nothing that could leave the metadata directory.
  if (it == undo.end() || !it->is_string() || it->get<std::string>().empty() ||
      it->get<std::string>().find('/') != std::string::npos || it->get<std::string>() == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("deviceMetadata undo: ", key, ": expected a name without '/'"));
  }
  return it->get<std::string>();
}

class MetadataStep final : public prepare::PlanStep {
 public:
  MetadataStep(MetadataClaim claim, const DeviceMetadataFiles* files)
      : claim_(std::move(claim)), files_(files) {}
  std::string name() const override { return kDeviceMetadataStep; }
  nlohmann::json UndoData() const override {
    nlohmann::json requests = nlohmann::json::array();
    for (const MetadataRequest& r : claim_.requests) requests.push_back(r.name);
    return {{"uid", claim_.uid},
            {"namespace", claim_.namespace_name},
            {"name", claim_.name},
            {"requests", requests}};
  }
  // The plugin's own files, but outside the CDI spec sweep of the cleanup: recorded before they
  // are written, so that every path that ends a claim finds them in the record.
  bool external() const override { return true; }
  bool resumable() const override { return false; }  // Write removes what it wrote on failure
  absl::Status Apply(const Deadline& deadline) override {
    RETURN_IF_ERROR(deadline.Check("write the device metadata"));
    if (files_ == nullptr) {
      return absl::InternalError("device metadata requested but this plugin has no metadata dir");
    }
    RETURN_IF_ERROR(files_->Write(claim_));
    DRA_VLOG(2, "wrote device metadata", "claim", claim_.uid, "requests", claim_.requests.size());
    return absl::OkStatus();
  }

 private:
  const MetadataClaim claim_;
  const DeviceMetadataFiles* const files_;
};

}  // namespace

std::string TopLevelRequest(const std::string& request) {
  return request.substr(0, request.find('/'));
}

std::string DeviceMetadataFiles::CdiDeviceId(const std::string& claim_uid,
                                             const std::string& request) {
  return absl::StrCat(kMetadataCdiKind, "=", CdiName(claim_uid, request));
}

std::string DeviceMetadataFiles::ContainerPath(const MetadataClaim& claim,
                                               const std::string& request) {
  if (claim.pod_claim_name) {
    return absl::StrCat(kContainerRoot, "/resourceclaimtemplates/", *claim.pod_claim_name, "/",
                        request, "/", kContainerFile);
  }
  return absl::StrCat(kContainerRoot, "/resourceclaims/", claim.name, "/", request, "/",
                      kContainerFile);
}

nlohmann::json DeviceMetadataFiles::Document(const MetadataClaim& claim,
                                             const MetadataRequest& request) {
  nlohmann::json devices = nlohmann::json::array();
  for (const MetadataDevice& d : request.devices) {
    nlohmann::json dev = {{"driver", d.driver}, {"pool", d.pool}, {"name", d.name}};
    if (d.attributes.is_object() && !d.attributes.empty()) dev["attributes"] = d.attributes;
    devices.push_back(std::move(dev));
  }
  nlohmann::json doc = {{"apiVersion", kMetadataApiVersion}, {"kind", "DeviceMetadata"}};
  if (claim.pod_claim_name) doc["podClaimName"] = *claim.pod_claim_name;
  doc["requests"] = nlohmann::json::array({{{"name", request.name}, {"devices", devices}}});
  return doc;
}

std::string DeviceMetadataFiles::ClaimDir(const std::string& namespace_name,
                                          const std::string& name) const {
  return absl::StrCat(plugin_data_dir_, "/dra-device-metadata/", namespace_name, "_", name);
}

std::string DeviceMetadataFiles::FilePath(const std::string& namespace_name,
                                          const std::string& name,
                                          const std::string& request) const {
  return absl::StrCat(ClaimDir(namespace_name, name), "/", request, "/metadata.json");
}

std::string DeviceMetadataFiles::SpecPath(const std::string& claim_uid,
                                          const std::string& request) const {
  return absl::StrCat(cdi_root_, "/gpu.nvidia.com_metadata_", CdiName(claim_uid, request), ".json");
}

absl::Status DeviceMetadataFiles::WriteRequest(const MetadataClaim& claim,
                                               const MetadataRequest& request) const {
  const std::string file = FilePath(claim.namespace_name, claim.name, request.name);
  RETURN_IF_ERROR(MakeDirectories(ClaimDir(claim.namespace_name, claim.name) + "/" + request.name));
  RETURN_IF_ERROR(WriteFileAtomically(file, Document(claim, request).dump(2) + "\n"));
  cdi::Spec spec;
  spec.version = "0.5.0";
  spec.kind = kMetadataCdiKind;
  cdi::Device device;
  device.name = CdiName(claim.uid, request.name);
  device.container_edits.mounts.push_back({.host_path = file,
                                           .container_path = ContainerPath(claim, request.name),
                                           .options = {"ro", "bind"}});
  spec.devices.push_back(std::move(device));
  RETURN_IF_ERROR(Annotate(cdi::ValidateSpec(spec), "device metadata CDI spec"));
  RETURN_IF_ERROR(MakeDirectories(cdi_root_));
  return WriteFileAtomically(SpecPath(claim.uid, request.name), cdi::EncodeSpec(spec));
}

absl::Status DeviceMetadataFiles::Write(const MetadataClaim& claim) const {
  for (const MetadataRequest& r : claim.requests) {
    absl::Status s = WriteRequest(claim, r);
    if (s.ok()) continue;
    std::vector<std::string> names;
    for (const MetadataRequest& each : claim.requests) names.push_back(each.name);
    const absl::Status undo = Remove(claim.uid, claim.namespace_name, claim.name, names);
    if (!undo.ok()) {
      DRA_WARNING("cannot remove partly written device metadata", "claim", claim.uid, "err", undo);
    }
    return Annotate(s, absl::StrCat("write the device metadata of request ", r.name));
  }
  return absl::OkStatus();
}

absl::Status DeviceMetadataFiles::Remove(const std::string& claim_uid,
                                         const std::string& namespace_name, const std::string& name,
                                         const std::vector<std::string>& requests) const {
  // Everything is tried; the first error is returned.
  const std::string claim_dir = ClaimDir(namespace_name, name);
  absl::Status first;
  for (const std::string& request : requests) {
    first.Update(RemovePath(SpecPath(claim_uid, request), false));
    first.Update(RemovePath(FilePath(namespace_name, name, request), false));
    first.Update(RemovePath(claim_dir + "/" + request, true));
  }
  first.Update(RemovePath(claim_dir, true));
  return first;
}

std::unique_ptr<prepare::PlanStep> DeviceMetadataStep(MetadataClaim claim,
                                                      const DeviceMetadataFiles* files) {
  return std::make_unique<MetadataStep>(std::move(claim), files);
}

absl::Status UndoDeviceMetadata(const DeviceMetadataFiles* files, const nlohmann::json& undo) {
  if (!undo.is_object()) return absl::InvalidArgumentError("deviceMetadata undo: expected object");
  ASSIGN_OR_RETURN(std::string uid, UndoString(undo, "uid"));
  ASSIGN_OR_RETURN(std::string ns, UndoString(undo, "namespace"));
  ASSIGN_OR_RETURN(std::string name, UndoString(undo, "name"));
  std::vector<std::string> requests;
  auto it = undo.find("requests");
  if (it == undo.end() || !it->is_array()) {
    return absl::InvalidArgumentError("deviceMetadata undo: requests: expected a list");
  }
  for (const nlohmann::json& r : *it) {
    // Names become path elements: nothing that could leave the claim's directory.
    if (!r.is_string() || r.get<std::string>().empty() ||
        r.get<std::string>().find('/') != std::string::npos || r.get<std::string>() == "..") {
      return absl::InvalidArgumentError(
          "deviceMetadata undo: requests: expected request names (no '/')");
    }
    requests.push_back(r.get<std::string>());
  }
  if (files == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("device metadata of claim ", uid, " needs removal but this plugin has none"));
  }
  RETURN_IF_ERROR(Annotate(files->Remove(uid, ns, name, requests), "remove the device metadata"));
  DRA_VLOG(2, "removed device metadata", "claim", uid, "requests", requests.size());
  return absl::OkStatus();
}

}  // namespace dra::gpu
