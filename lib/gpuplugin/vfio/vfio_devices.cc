#include "lib/gpuplugin/vfio/vfio_devices.h"

#include <openssl/sha.h>

#include <charconv>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/common/atomic_file.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/gpuplugin/inventory/sysfs.h"

namespace dra::gpu {
namespace {

// RFC 4122 appendix C: the DNS namespace.
constexpr unsigned char kDnsNamespace[16] = {0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1,
                                             0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8};

// "0x10de" / "10de" -> "10de" (lower case, 4 digits); empty when not a 16-bit hex number.
std::string Hex4(absl::string_view id) {
  std::string s = absl::AsciiStrToLower(absl::StripAsciiWhitespace(id));
  if (absl::StartsWith(s, "0x")) s = s.substr(2);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, 16);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || value > 0xffff) return "";
  char out[5];
  std::snprintf(out, sizeof(out), "%04x", value);
  return out;
}

std::string ProductName(const std::string& host_root, const std::string& device_hex) {
  for (const char* path : {"/usr/share/misc/pci.ids", "/usr/local/share/pci.ids",
                           "/usr/share/hwdata/pci.ids", "/usr/share/pci.ids"}) {
    absl::StatusOr<std::string> text = ReadFile(host_root + path);
    if (!text.ok()) continue;
    return PciIdsDeviceName(*text, "10de", device_hex);
  }
  return "";
}

}  // namespace

std::string VfioDeviceName(size_t index) { return absl::StrCat("gpu-vfio-", index); }

std::string Uuid5Dns(absl::string_view name) {
  std::string input(reinterpret_cast<const char*>(kDnsNamespace), sizeof(kDnsNamespace));
  input.append(name.data(), name.size());
  unsigned char hash[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(input.data()), input.size(), hash);
  hash[6] = (hash[6] & 0x0f) | 0x50;  // version 5
  hash[8] = (hash[8] & 0x3f) | 0x80;  // RFC 4122 variant
  std::string out;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    char b[3];
    std::snprintf(b, sizeof(b), "%02x", hash[i]);
    out += b;
  }
  return out;
}

uint64_t AddressableMemory(absl::string_view resource_text) {
  uint64_t total = 0;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(resource_text, '\n')) {
    if (line_no++ >= 6) break;
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint64_t start = 0, end = 0, flags = 0;
    if (f.size() < 3 || !absl::SimpleHexAtoi(f[0], &start) || !absl::SimpleHexAtoi(f[1], &end) ||
        !absl::SimpleHexAtoi(f[2], &flags)) {
      continue;
    }
    // IORESOURCE_MEM (0x200) with IORESOURCE_MEM_64 (0x100000); the Go library tests the
    // PCI BAR's 64-bit type bit, which the kernel reports as IORESOURCE_MEM_64.
    if ((flags & 0x200) == 0 || (flags & 0x100000) == 0 || end <= start) continue;
    total += end - start + 1;
  }
  if (total == 0) return 0;
  uint64_t p = 1;
  while (p < total && p != 0) p <<= 1;
  return p;
}

std::string PciIdsDeviceName(absl::string_view pci_ids, absl::string_view vendor_id,
                             absl::string_view device_id) {
  bool in_vendor = false;
  for (absl::string_view line : absl::StrSplit(pci_ids, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] != '\t') {
      in_vendor = absl::StartsWith(line, absl::StrCat(vendor_id, "  "));
      continue;
    }
    if (in_vendor && line.size() > 1 && line[1] != '\t' &&
        absl::StartsWith(line.substr(1), absl::StrCat(device_id, "  "))) {
      return std::string(absl::StripAsciiWhitespace(line.substr(1 + device_id.size())));
    }
  }
  return "";
}

absl::StatusOr<std::vector<VfioDevice>> VfioDevices(const std::vector<PciGpu>& gpus,
                                                    const std::string& host_root) {
  std::vector<VfioDevice> out;
  const bool iommufd = IommufdAvailable(host_root);
  const std::string sysfs = host_root + "/sys";
  for (size_t i = 0; i < gpus.size(); ++i) {
    const PciGpu& g = gpus[i];
    VfioDevice v{.pci = g};
    AllocatableDevice& d = v.device;
    d.name = VfioDeviceName(i);
    d.type = DeviceType::kVfio;
    d.gpu.pci_bus_id = g.bus_id;
    d.gpu.numa_node = g.numa_node;
    const std::string device_hex = Hex4(g.device_id);
    if (device_hex.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("PCI device ", g.bus_id, ": device id \"",
                                                     g.device_id, "\" is not a 16-bit hex number"));
    }
    k8s::Device& p = d.published;
    p.name = d.name;
    p.attributes["type"] = k8s::DeviceAttribute::String("vfio");
    p.attributes["uuid"] = k8s::DeviceAttribute::String(Uuid5Dns(g.bus_id));
    p.attributes["deviceID"] = k8s::DeviceAttribute::String("0x" + device_hex);
    p.attributes["vendorID"] = k8s::DeviceAttribute::String("0x10de");
    const std::string product = ProductName(host_root, device_hex);
    if (!product.empty()) p.attributes["productName"] = k8s::DeviceAttribute::String(product);
    p.attributes["iommuFDEnabled"] = k8s::DeviceAttribute::Bool(iommufd);
    p.attributes["resource.kubernetes.io/pciBusID"] = k8s::DeviceAttribute::String(g.bus_id);
    absl::StatusOr<std::string> root = ReadPcieRoot(sysfs, g.bus_id);
    if (root.ok()) {
      d.gpu.pcie_root = *root;
      p.attributes["resource.kubernetes.io/pcieRoot"] = k8s::DeviceAttribute::String(*root);
    } else {
      DRA_WARNING("PCIe root unknown; publishing no pcieRoot attribute", "pciBusID", g.bus_id,
                  "err", root.status());
    }
    if (g.numa_node) {
      p.attributes["resource.kubernetes.io/numaNode"] = k8s::DeviceAttribute::Int(*g.numa_node);
    }
    absl::StatusOr<std::string> resource =
        ReadFile(absl::StrCat(sysfs, "/bus/pci/devices/", g.bus_id, "/resource"));
    if (resource.ok()) {
      if (const uint64_t bytes = AddressableMemory(*resource); bytes > 0) {
        p.capacity["addressableMemory"].value =
            k8s::Quantity::FromBytes(static_cast<int64_t>(bytes));
      }
    } else if (!absl::IsNotFound(resource.status())) {
      return Annotate(resource.status(), "PCI device " + g.bus_id);
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace dra::gpu
