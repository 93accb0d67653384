#include "lib/cdi/version.h"

#include <array>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dra::cdi {
namespace {

constexpr std::array<absl::string_view, 10> kKnownVersions = {
    "0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"};

std::tuple<int, int, int> Parse(absl::string_view v) {
  std::array<int, 3> parts = {0, 0, 0};
  size_t i = 0;
  for (absl::string_view p : absl::StrSplit(v, '.')) {
    if (i == parts.size()) break;
    int n = 0;
    if (!absl::SimpleAtoi(p, &n)) n = 0;
    parts[i++] = n;
  }
  return {parts[0], parts[1], parts[2]};
}

// Raises `out` to `version` (keeping the first reason for the highest version).
void Require(RequiredVersion& out, absl::string_view version, std::string reason) {
  if (CompareVersions(version, out.version) > 0) {
    out.version = std::string(version);
    out.reason = std::move(reason);
  }
}

void EditsRequire(RequiredVersion& out, const ContainerEdits& edits, const std::string& path) {
  for (size_t i = 0; i < edits.mounts.size(); ++i) {
    if (!edits.mounts[i].type.empty()) {
      Require(out, "0.4.0", absl::StrCat(path, "mounts[", i, "].type"));
    }
  }
  for (size_t i = 0; i < edits.device_nodes.size(); ++i) {
    if (!edits.device_nodes[i].host_path.empty()) {
      Require(out, "0.5.0", absl::StrCat(path, "deviceNodes[", i, "].hostPath"));
    }
  }
  if (!edits.additional_gids.empty()) {
    Require(out, "0.7.0", absl::StrCat(path, "additionalGids"));
  }
}

}  // namespace

bool IsKnownVersion(absl::string_view version) {
  for (absl::string_view v : kKnownVersions) {
    if (v == version) return true;
  }
  return false;
}

int CompareVersions(absl::string_view a, absl::string_view b) {
  auto pa = Parse(a), pb = Parse(b);
  return pa < pb ? -1 : (pa > pb ? 1 : 0);
}

RequiredVersion MinimumVersion(const Spec& spec) {
  RequiredVersion out{std::string(kEarliestVersion), ""};
  if (!spec.annotations.empty()) Require(out, "0.6.0", "annotations");
  if (size_t slash = spec.kind.find('/');
      slash != std::string::npos && spec.kind.find('.', slash) != std::string::npos) {
    Require(out, "0.6.0", "kind (a '.' in the class)");
  }
  EditsRequire(out, spec.container_edits, "containerEdits.");
  for (size_t i = 0; i < spec.devices.size(); ++i) {
    const Device& d = spec.devices[i];
    const std::string path = absl::StrCat("devices[", i, "].");
    if (!d.name.empty() && absl::ascii_isdigit(static_cast<unsigned char>(d.name.front()))) {
      Require(out, "0.5.0", absl::StrCat(path, "name (starts with a digit)"));
    }
    if (!d.annotations.empty()) Require(out, "0.6.0", absl::StrCat(path, "annotations"));
    EditsRequire(out, d.container_edits, absl::StrCat(path, "containerEdits."));
  }
  return out;
}

}  // namespace dra::cdi
