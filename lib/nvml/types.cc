#include "lib/nvml/types.h"

#include <cstdio>

namespace dra::nvml {

std::string_view ArchitectureName(Architecture arch) {
  switch (arch) {
    case Architecture::kKepler:
      return "Kepler";
    case Architecture::kMaxwell:
      return "Maxwell";
    case Architecture::kPascal:
      return "Pascal";
    case Architecture::kVolta:
      return "Volta";
    case Architecture::kTuring:
      return "Turing";
    case Architecture::kAmpere:
      return "Ampere";
    case Architecture::kAda:
      return "Ada Lovelace";
    case Architecture::kHopper:
      return "Hopper";
    case Architecture::kBlackwell:
      return "Blackwell";
    case Architecture::kRubin:
      return "Rubin";
    default:
      return "Unknown";
  }
}

std::string_view BrandName(Brand brand) {
  static constexpr std::string_view kNames[] = {
      "Unknown",   "Quadro",      "Tesla",     "NVS",        "Grid",      "GeForce",
      "Titan",     "NvidiaVApps", "NvidiaVPC", "NvidiaVCS",  "NvidiaVWS", "NvidiaCloudGaming",
      "QuadroRTX", "NvidiaRTX",   "Nvidia",    "GeForceRTX", "TitanRTX"};
  const int i = static_cast<int>(brand);
  return i >= 0 && i < static_cast<int>(std::size(kNames)) ? kNames[i] : "Unknown";
}

std::string_view AddressingModeName(AddressingMode mode) {
  switch (mode) {
    case AddressingMode::kHmm:
      return "HMM";
    case AddressingMode::kAts:
      return "ATS";
    default:
      return "None";
  }
}

bool FabricInfo::ClusterUuidIsZero() const {
  for (uint8_t b : cluster_uuid) {
    if (b != 0) return false;
  }
  return true;
}

std::string FabricInfo::ClusterUuidString() const {
  const auto& b = cluster_uuid;
  char text[37];
  std::snprintf(text, sizeof(text),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return text;
}

}  // namespace dra::nvml
