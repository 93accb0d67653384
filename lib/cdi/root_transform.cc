#include "lib/cdi/root_transform.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dra::cdi {
namespace {

// "/a/b/" -> "/a/b"; "/" and "" stay as they are.
absl::string_view TrimTrailingSlashes(absl::string_view p) {
  while (p.size() > 1 && p.back() == '/') p.remove_suffix(1);
  return p;
}

void RewriteInPlace(std::string& path, absl::string_view from, absl::string_view to) {
  if (std::optional<std::string> rewritten = RewritePathPrefix(path, from, to)) {
    path = std::move(*rewritten);
  }
}

}  // namespace

std::optional<std::string> RewritePathPrefix(absl::string_view path, absl::string_view from,
                                             absl::string_view to) {
  from = TrimTrailingSlashes(from);
  to = TrimTrailingSlashes(to);
  if (from.empty() || path.empty() || path.front() != '/') return std::nullopt;
  absl::string_view rest;  // what follows `from`: "" or "/..."
  if (from == "/") {
    rest = path == "/" ? absl::string_view() : path;
  } else if (absl::StartsWith(path, from) &&
             (path.size() == from.size() || path[from.size()] == '/')) {
    rest = path.substr(from.size());
  } else {
    return std::nullopt;
  }
  if (to.empty() || to == "/") return rest.empty() ? std::string("/") : std::string(rest);
  return absl::StrCat(to, rest);
}

void TransformRoot(ContainerEdits& edits, absl::string_view from, absl::string_view to) {
  if (TrimTrailingSlashes(from) == TrimTrailingSlashes(to)) return;
  for (DeviceNode& d : edits.device_nodes) {
    const std::string& host = d.host_path.empty() ? d.path : d.host_path;
    std::optional<std::string> rewritten = RewritePathPrefix(host, from, to);
    // Leave an empty hostPath empty when it would equal path: it needs a newer cdiVersion.
    if (rewritten && !(d.host_path.empty() && *rewritten == d.path)) {
      d.host_path = std::move(*rewritten);
    }
  }
  for (Mount& m : edits.mounts) RewriteInPlace(m.host_path, from, to);
  for (Hook& h : edits.hooks) RewriteInPlace(h.path, from, to);
}

void TransformRoot(Spec& spec, absl::string_view from, absl::string_view to) {
  TransformRoot(spec.container_edits, from, to);
  for (Device& d : spec.devices) TransformRoot(d.container_edits, from, to);
}

}  // namespace dra::cdi
