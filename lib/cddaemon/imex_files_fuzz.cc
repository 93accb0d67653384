#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "lib/cddaemon/fuzz_targets.h"
#include "lib/cddaemon/hosts_file.h"
#include "lib/cddaemon/imex_files.h"
#include "lib/common/json_access.h"
#include "lib/k8s/objects_compute_domain.h"

namespace dra::cddaemon::fuzz {
namespace {

[[noreturn]] void Violation(const char* what) {
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
  std::abort();
}

size_t Lines(absl::string_view text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines.size();
}

// The rewrite is idempotent, ends with our block (one line per mapping) and keeps the other lines.
void Hosts(absl::string_view existing, const DnsMappings& mappings) {
  const std::string once = RenderHostsFile(existing, mappings);
  if (RenderHostsFile(once, mappings) != once) Violation("hosts rewrite is not idempotent");
  if (!once.empty() && once.back() != '\n') Violation("hosts file without a final newline");
  const std::string without = RenderHostsFile(existing, DnsMappings());
  if (Lines(without) > Lines(existing)) Violation("hosts rewrite added lines of its own");
  const size_t block = mappings.empty() ? 0 : mappings.size() + 2;
  if (Lines(once) != Lines(without) + block) Violation("hosts block is not one line per mapping");
  if (RenderHostsFile(once, DnsMappings()) != without) Violation("hosts block not removable");
}

}  // namespace

void ImexFiles(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);

  absl::StatusOr<std::string> cfg = RenderImexConfig(text, "10.0.0.1", "/imexd/nodes.cfg");
  if (cfg.ok()) {
    if (absl::StrContains(*cfg, "{{")) Violation("rendered config holds a placeholder");
    absl::StatusOr<std::string> again = RenderImexConfig(*cfg, "10.0.0.2", "/other");
    if (!again.ok() || *again != *cfg) Violation("rendered config renders differently");
  } else if (!absl::StrContains(cfg.status().message(), kConfigTemplateName)) {
    Violation("template error does not name the template");
  }

  Hosts(text, DnsMappings());
  Hosts(text, {{DnsName(0), "10.0.0.1"}, {DnsName(3), "fd00::3"}});

  absl::StatusOr<nlohmann::json> j = json_access::Parse(text);
  if (!j.ok()) return;
  absl::StatusOr<k8s::ComputeDomainClique> clique = k8s::ComputeDomainClique::FromJson(*j);
  if (!clique.ok()) return;
  constexpr int kMaxNodes = 4;
  absl::StatusOr<DnsMappings> mappings = BuildDnsMappings(clique->daemons, "u.7", kMaxNodes);
  if (!mappings.ok()) return;
  if (mappings->size() > static_cast<size_t>(kMaxNodes)) Violation("more mappings than nodes");
  Hosts("127.0.0.1\tlocalhost\n", *mappings);
}

}  // namespace dra::cddaemon::fuzz
