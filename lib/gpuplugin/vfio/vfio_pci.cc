#include "lib/gpuplugin/vfio/vfio_pci.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/common/atomic_file.h"
#include "lib/common/status.h"

namespace dra::gpu {
namespace {

namespace fs = std::filesystem;

// The trimmed contents of an attribute file; nullopt when it does not exist.
absl::StatusOr<std::optional<std::string>> ReadAttr(const fs::path& dir, const char* name) {
  absl::StatusOr<std::string> text = ReadFile((dir / name).string());
  if (absl::IsNotFound(text.status())) return std::nullopt;
  if (!text.ok()) return text.status();
  return std::string(absl::StripAsciiWhitespace(*text));
}

absl::StatusOr<int> ParseInt(const std::string& text, const fs::path& file) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.string(), ": expected an integer, got \"", text, "\""));
  }
  return value;
}

// An optional integer attribute: `fallback` when absent.
absl::StatusOr<int> IntAttr(const fs::path& dir, const char* name, int fallback) {
  ASSIGN_OR_RETURN(std::optional<std::string> text, ReadAttr(dir, name));
  if (!text) return fallback;
  return ParseInt(*text, dir / name);
}

// The basename of a symlink's target; empty when there is no link.
std::string LinkBase(const fs::path& link) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(link, ec);
  return ec ? std::string() : target.filename().string();
}

absl::StatusOr<PciGpu> ReadGpu(const fs::path& dir, const std::string& modules_alias) {
  PciGpu g;
  g.bus_id = dir.filename().string();
  ASSIGN_OR_RETURN(std::optional<std::string> device, ReadAttr(dir, "device"));
  g.device_id = device.value_or("");
  ASSIGN_OR_RETURN(std::optional<std::string> pci_class, ReadAttr(dir, "class"));
  g.pci_class = pci_class.value_or("");
  g.driver = LinkBase(dir / "driver");
  const std::string group = LinkBase(dir / "iommu_group");
  if (!group.empty()) {
    ASSIGN_OR_RETURN(g.iommu_group, ParseInt(group, dir / "iommu_group"));
  }
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir / "vfio-dev", ec)) {
    const std::string name = e.path().filename().string();
    if (absl::StartsWith(name, "vfio")) g.iommufd_cdev = name;
  }
  ASSIGN_OR_RETURN(int numa, IntAttr(dir, "numa_node", -1));
  if (numa >= 0) g.numa_node = numa;
  ASSIGN_OR_RETURN(g.sriov_numvfs, IntAttr(dir, "sriov_numvfs", 0));
  ASSIGN_OR_RETURN(g.sriov_totalvfs, IntAttr(dir, "sriov_totalvfs", 0));
  ASSIGN_OR_RETURN(std::optional<std::string> modalias, ReadAttr(dir, "modalias"));
  g.modalias = modalias.value_or("");
  g.vfio_module = BestVfioModule(modules_alias, g.modalias);
  return g;
}

}  // namespace

bool GlobMatch(absl::string_view pattern, absl::string_view text) {
  size_t p = 0, t = 0, star = absl::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != absl::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string BestVfioModule(absl::string_view modules_alias, absl::string_view modalias) {
  // The device's modalias reads "pci:v...d..."; the vfio aliases are "vfio_pci:v...d...".
  modalias = absl::StripPrefix(modalias, "pci:");
  std::string best = kDefaultVfioModule;
  size_t best_stars = absl::string_view::npos;
  for (absl::string_view line : absl::StrSplit(modules_alias, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() != 3 || f[0] != "alias" || !absl::StartsWith(f[1], "vfio_pci:")) continue;
    const absl::string_view pattern = f[1].substr(9);
    if (!GlobMatch(pattern, modalias)) continue;
    const size_t stars = std::count(pattern.begin(), pattern.end(), '*');
    if (best_stars == absl::string_view::npos || stars < best_stars) {
      best_stars = stars;
      best = std::string(f[2]);
    }
  }
  return best;
}

std::string VfioDriverName(absl::string_view module) {
  std::string out(module);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

absl::StatusOr<std::vector<PciGpu>> DiscoverPciGpus(const std::string& host_root,
                                                    const std::string& kernel_release) {
  absl::StatusOr<std::string> aliases =
      ReadFile(absl::StrCat(host_root, "/lib/modules/", kernel_release, "/modules.alias"));
  if (!aliases.ok() && !absl::IsNotFound(aliases.status())) return aliases.status();
  const std::string modules_alias = aliases.value_or("");
  std::vector<PciGpu> out;
  const fs::path devices = fs::path(host_root) / "sys/bus/pci/devices";
  std::error_code ec;
  fs::directory_iterator it(devices, ec);
  if (ec == std::errc::no_such_file_or_directory) return out;
  if (ec) return absl::InternalError(absl::StrCat("list ", devices.string(), ": ", ec.message()));
  for (const fs::directory_entry& e : it) {
    const fs::path& dir = e.path();
    ASSIGN_OR_RETURN(std::optional<std::string> vendor, ReadAttr(dir, "vendor"));
    ASSIGN_OR_RETURN(std::optional<std::string> pci_class, ReadAttr(dir, "class"));
    if (vendor != kNvidiaPciVendor || !pci_class) continue;
    if (*pci_class != "0x030000" && *pci_class != "0x030200") continue;
    if (fs::exists(dir / "physfn", ec)) continue;  // a VF
    absl::StatusOr<PciGpu> gpu = ReadGpu(dir, modules_alias);
    if (!gpu.ok()) return Annotate(gpu.status(), "PCI device " + dir.filename().string());
    out.push_back(*std::move(gpu));
  }
  std::sort(out.begin(), out.end(),
            [](const PciGpu& a, const PciGpu& b) { return a.bus_id < b.bus_id; });
  return out;
}

bool IommuEnabled(const std::string& host_root) {
  std::error_code ec;
  fs::directory_iterator it(fs::path(host_root) / "sys/kernel/iommu_groups", ec);
  return !ec && it != fs::directory_iterator();
}

bool IommufdAvailable(const std::string& host_root) {
  std::error_code ec;
  return fs::exists(fs::path(host_root) / "dev/iommu", ec);
}

}  // namespace dra::gpu
