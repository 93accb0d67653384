#include "test/doubles/mock-nvml/spec.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "lib/nvml/nvml_abi.h"
#include "nlohmann/json.hpp"
#include "test/doubles/mock-nvml/state.h"
#include "test/doubles/mock-nvml/uuid.h"

namespace mock_nvml {
namespace {

namespace abi = dra::nvml::abi;
using nlohmann::json;

// Profile parse errors travel as this exception inside this file only; ParseNodeSpec catches it
// (and nlohmann's own exceptions) and turns them into an error string.
struct SpecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw SpecError(where + ": " + what);
}

const json& Required(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) Fail(where, std::string("missing field \"") + key + "\"");
  return *it;
}

unsigned long long ParseUnsigned(const json& v, const std::string& where) {
  if (v.is_number_unsigned()) return v.get<unsigned long long>();
  if (v.is_number_integer() && v.get<long long>() >= 0) return v.get<unsigned long long>();
  if (v.is_string()) {  // hex ids are easier to read as "0x233010de"
    const std::string s = v.get<std::string>();
    char* end = nullptr;
    unsigned long long out = std::strtoull(s.c_str(), &end, 0);
    if (!s.empty() && end && *end == '\0') return out;
  }
  Fail(where, "want a non-negative integer");
}

unsigned int Uint(const json& obj, const char* key, const std::string& where) {
  return static_cast<unsigned int>(ParseUnsigned(Required(obj, key, where), where + "." + key));
}

unsigned int UintOr(const json& obj, const char* key, unsigned int fallback,
                    const std::string& where) {
  return obj.contains(key) ? Uint(obj, key, where) : fallback;
}

std::string Str(const json& obj, const char* key, const std::string& where) {
  const json& v = Required(obj, key, where);
  if (!v.is_string()) Fail(where + "." + key, "want a string");
  return v.get<std::string>();
}

// Maps a lower-case name to a value, failing with the list of allowed names.
int Enum(const std::string& value, const std::map<std::string, int>& allowed,
         const std::string& where) {
  auto it = allowed.find(value);
  if (it != allowed.end()) return it->second;
  std::string names;
  for (const auto& [name, unused] : allowed) names += (names.empty() ? "" : ", ") + name;
  Fail(where, "\"" + value + "\" is not one of: " + names);
}

const std::map<std::string, int> kArchitectures = {{"kepler", abi::kArchKepler},
                                                   {"maxwell", abi::kArchMaxwell},
                                                   {"pascal", abi::kArchPascal},
                                                   {"volta", abi::kArchVolta},
                                                   {"turing", abi::kArchTuring},
                                                   {"ampere", abi::kArchAmpere},
                                                   {"ada", abi::kArchAda},
                                                   {"hopper", abi::kArchHopper},
                                                   {"blackwell", abi::kArchBlackwell},
                                                   {"rubin", abi::kArchRubin}};
const std::map<std::string, int> kBrands = {
    {"unknown", abi::kBrandUnknown},     {"quadro", abi::kBrandQuadro},
    {"tesla", abi::kBrandTesla},         {"geforce", abi::kBrandGeforce},
    {"titan", abi::kBrandTitan},         {"nvidia", abi::kBrandNvidia},
    {"nvidia_rtx", abi::kBrandNvidiaRtx}};
const std::map<std::string, int> kAddressingModes = {{"none", abi::kAddressingModeNone},
                                                     {"hmm", abi::kAddressingModeHmm},
                                                     {"ats", abi::kAddressingModeAts}};
const std::map<std::string, int> kVirtualizationModes = {
    {"none", abi::kVirtualizationModeNone},
    {"passthrough", abi::kVirtualizationModePassthrough},
    {"vgpu", abi::kVirtualizationModeVgpu}};
const std::map<std::string, int> kComputeModes = {
    {"default", abi::kComputeModeDefault},
    {"prohibited", abi::kComputeModeProhibited},
    {"exclusive_process", abi::kComputeModeExclusiveProcess}};
const std::map<std::string, int> kFabricStates = {
    {"not_supported", abi::kGpuFabricStateNotSupported},
    {"not_started", abi::kGpuFabricStateNotStarted},
    {"in_progress", abi::kGpuFabricStateInProgress},
    {"completed", abi::kGpuFabricStateCompleted}};

// An enum field given by name from `allowed`, or as a raw integer: a value NVML does not define
// today, for GPUs newer than the plugin ("architecture": 99).
int EnumOrRaw(const json& obj, const char* key, const std::map<std::string, int>& allowed,
              const std::string& where) {
  const json& v = Required(obj, key, where);
  if (v.is_number_integer()) return v.get<int>();
  if (!v.is_string()) Fail(where + "." + key, "want a name or an integer");
  return Enum(v.get<std::string>(), allowed, where + "." + key);
}

// Compute slices of each NVML_COMPUTE_INSTANCE_PROFILE_* index.
unsigned int CiSlices(unsigned int index) {
  static constexpr unsigned int kSlices[] = {1, 2, 3, 4, 7, 8, 6, 1};
  return index < sizeof(kSlices) / sizeof(kSlices[0]) ? kSlices[index] : 0;
}

GiProfile ParseGiProfile(const json& j, const std::string& where) {
  GiProfile p;
  p.index = Uint(j, "index", where);
  if (p.index >= abi::kGpuInstanceProfileCount) Fail(where + ".index", "out of range");
  p.id = Uint(j, "id", where);
  p.name = Str(j, "name", where);
  p.slices = Uint(j, "slices", where);
  p.instance_count = Uint(j, "instances", where);
  p.multiprocessors = Uint(j, "multiprocessors", where);
  p.copy_engines = UintOr(j, "copy_engines", 0, where);
  p.decoders = UintOr(j, "decoders", 0, where);
  p.encoders = UintOr(j, "encoders", 0, where);
  p.jpegs = UintOr(j, "jpegs", 0, where);
  p.ofas = UintOr(j, "ofas", 0, where);
  p.memory_mib = ParseUnsigned(Required(j, "memory_mib", where), where + ".memory_mib");
  p.p2p = j.value("p2p", false);
  p.placement_size = Uint(j, "placement_size", where);
  for (const json& s : Required(j, "placements", where)) {
    p.placement_starts.push_back(
        static_cast<unsigned int>(ParseUnsigned(s, where + ".placements")));
  }
  for (const json& c : Required(j, "compute_profiles", where)) {
    CiProfile ci;
    ci.index = static_cast<unsigned int>(ParseUnsigned(c, where + ".compute_profiles"));
    ci.slices = CiSlices(ci.index);
    if (ci.slices == 0 || ci.slices > p.slices) {
      Fail(where + ".compute_profiles", "profile " + std::to_string(ci.index) + " does not fit");
    }
    ci.multiprocessors =
        ci.slices == p.slices ? p.multiprocessors : p.multiprocessors / p.slices * ci.slices;
    ci.instance_count = p.slices / ci.slices;
    p.compute_profiles.push_back(ci);
  }
  return p;
}

MigTable ParseMigTable(const json& j, const std::string& where) {
  MigTable t;
  t.memory_slices = UintOr(j, "memory_slices", 8, where);
  t.compute_slices = UintOr(j, "compute_slices", 7, where);
  const json& profiles = Required(j, "gpu_instance_profiles", where);
  for (size_t i = 0; i < profiles.size(); ++i) {
    t.profiles.push_back(
        ParseGiProfile(profiles[i], where + ".gpu_instance_profiles[" + std::to_string(i) + "]"));
  }
  return t;
}

void ParsePciBusId(const std::string& text, GpuSpec* gpu, const std::string& where) {
  unsigned int domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(text.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) {
    Fail(where, "want a PCI address like 0000:18:00.0");
  }
  gpu->pci_domain = domain;
  gpu->pci_bus = bus;
  gpu->pci_device = device;
}

void ParseMig(const json& j, const std::map<std::string, MigTable>& tables, GpuSpec* gpu,
              const std::string& where) {
  const std::string table = Str(j, "table", where);
  auto it = tables.find(table);
  if (it == tables.end()) Fail(where + ".table", "no mig_tables entry \"" + table + "\"");
  gpu->mig_table = it->second;
  gpu->initial_mig_enabled = j.value("mode", std::string("disabled")) == "enabled";
  gpu->mig_toggle_requires_reset = j.value("toggle_requires_reset", false);
  if (!j.contains("instances")) return;
  for (const json& inst : j.at("instances")) {
    const std::string profile = Str(inst, "profile", where + ".instances");
    const GiProfile* found = nullptr;
    for (const GiProfile& p : gpu->mig_table->profiles) {
      if (p.name == profile) found = &p;
    }
    if (found == nullptr) Fail(where + ".instances", "unknown profile \"" + profile + "\"");
    gpu->initial_instances.push_back({found->index, Uint(inst, "placement", where + ".instances")});
  }
}

FabricSpec ParseFabric(const json& j, const std::string& where) {
  FabricSpec f;
  if (j.contains("cluster_uuid") &&
      !ParseUuidBytes(Str(j, "cluster_uuid", where), f.cluster_uuid.data())) {
    Fail(where + ".cluster_uuid", "want a UUID like 5f4d2a1e-...");
  }
  f.clique_id = UintOr(j, "clique_id", 0, where);
  f.state = static_cast<unsigned char>(
      Enum(j.value("state", std::string("completed")), kFabricStates, where + ".state"));
  f.status = static_cast<int>(UintOr(j, "status", 0, where));
  f.health_mask = UintOr(j, "health_mask", 0, where);
  return f;
}

GpuSpec ParseGpu(const json& j, const std::map<std::string, MigTable>& tables,
                 const std::string& where) {
  GpuSpec g;
  g.name = Str(j, "name", where);
  g.uuid = Str(j, "uuid", where);
  g.minor = Uint(j, "minor", where);
  ParsePciBusId(Str(j, "pci_bus_id", where), &g, where + ".pci_bus_id");
  g.pci_device_id = Uint(j, "pci_device_id", where);
  g.pci_subsystem_id = UintOr(j, "pci_subsystem_id", 0, where);
  constexpr unsigned long long kMiB = 1ULL << 20;
  g.memory_total = ParseUnsigned(Required(j, "memory_total_mib", where), where) * kMiB;
  g.memory_reserved = UintOr(j, "memory_reserved_mib", 0, where) * kMiB;
  g.memory_used = g.memory_reserved + UintOr(j, "memory_used_mib", 0, where) * kMiB;
  g.architecture = static_cast<unsigned int>(EnumOrRaw(j, "architecture", kArchitectures, where));
  g.brand = EnumOrRaw(j, "brand", kBrands, where);
  const std::string cc = Str(j, "cuda_compute_capability", where);
  if (std::sscanf(cc.c_str(), "%d.%d", &g.cc_major, &g.cc_minor) != 2) {
    Fail(where + ".cuda_compute_capability", "want \"<major>.<minor>\"");
  }
  g.virtualization_mode = Enum(j.value("virtualization_mode", std::string("none")),
                               kVirtualizationModes, where + ".virtualization_mode");
  if (j.contains("addressing_mode")) {
    g.addressing_mode = static_cast<unsigned int>(
        Enum(Str(j, "addressing_mode", where), kAddressingModes, where + ".addressing_mode"));
  }
  if (j.contains("module_id")) g.module_id = Uint(j, "module_id", where);
  if (j.contains("fabric")) g.fabric = ParseFabric(j.at("fabric"), where + ".fabric");
  if (j.contains("mig")) ParseMig(j.at("mig"), tables, &g, where + ".mig");
  g.initial_persistence = j.value("persistence_mode", true);
  g.initial_compute_mode =
      Enum(j.value("compute_mode", std::string("default")), kComputeModes, where + ".compute_mode");
  if (j.contains("forced_errors")) {
    for (const auto& [name, code] : j.at("forced_errors").items()) {
      g.forced_errors[name] = code.get<int>();
    }
  }
  g.lost = j.value("lost", false);
  return g;
}

}  // namespace

bool ParseNodeSpec(const std::string& json_text, NodeSpec* spec, std::string* error) {
  try {
    const json root = json::parse(json_text);
    NodeSpec out;
    out.driver_version = Str(root, "driver_version", "profile");
    out.cuda_driver_version = static_cast<int>(Uint(root, "cuda_driver_version", "profile"));
    out.nvml_version = root.value(
        "nvml_version", std::to_string(out.cuda_driver_version / 1000) + "." + out.driver_version);
    std::map<std::string, MigTable> tables;
    if (root.contains("mig_tables")) {
      for (const auto& [name, table] : root.at("mig_tables").items()) {
        tables[name] = ParseMigTable(table, "mig_tables." + name);
      }
    }
    const json defaults = root.value("gpu_defaults", json::object());
    const json& gpus = Required(root, "gpus", "profile");
    std::set<std::string> uuids, buses;
    std::set<unsigned int> minors;
    for (size_t i = 0; i < gpus.size(); ++i) {
      const std::string where = "gpus[" + std::to_string(i) + "]";
      json merged = defaults;
      merged.update(gpus[i]);
      GpuSpec gpu = ParseGpu(merged, tables, where);
      if (!uuids.insert(gpu.uuid).second) Fail(where + ".uuid", "duplicate " + gpu.uuid);
      if (!minors.insert(gpu.minor).second) Fail(where + ".minor", "duplicate");
      if (!buses.insert(merged.at("pci_bus_id").get<std::string>()).second) {
        Fail(where + ".pci_bus_id", "duplicate");
      }
      std::string error;
      if (!ValidateInitialInstances(gpu, &error)) Fail(where + ".mig.instances", error);
      out.gpus.push_back(std::move(gpu));
    }
    if (root.contains("forced_errors")) {
      for (const auto& [name, code] : root.at("forced_errors").items()) {
        out.forced_errors[name] = code.get<int>();
      }
    }
    *spec = std::move(out);
    return true;
  } catch (const std::exception& e) {  // SpecError or nlohmann::json::exception
    *error = e.what();
    return false;
  }
}

bool LoadNodeSpec(const std::string& path, NodeSpec* spec, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read profile " + path;
    return false;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (!ParseNodeSpec(buffer.str(), spec, error)) {
    *error = "profile " + path + ": " + *error;
    return false;
  }
  return true;
}

bool LoadEmbeddedNodeSpec(const std::string& library_path, NodeSpec* spec, std::string* error) {
  std::ifstream in(library_path, std::ios::binary | std::ios::ate);
  const std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : -1;
  if (size < static_cast<std::streamoff>(kEmbeddedProfileFooterSize)) {
    *error = "cannot read " + library_path;
    return false;
  }
  std::string footer(kEmbeddedProfileFooterSize, '\0');
  in.seekg(size - static_cast<std::streamoff>(footer.size()));
  in.read(footer.data(), static_cast<std::streamsize>(footer.size()));
  const std::string magic = kEmbeddedProfileMagic;
  if (!in || footer.compare(0, magic.size(), magic) != 0 || footer.back() != '\n') {
    *error = "no profile embedded in " + library_path;
    return false;
  }
  const std::string digits = footer.substr(magic.size(), footer.size() - magic.size() - 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos) {
    *error = "bad profile footer in " + library_path;
    return false;
  }
  const std::streamoff length = std::stoll(digits);
  const std::streamoff start = size - static_cast<std::streamoff>(footer.size()) - length;
  if (start < 0) {
    *error = "bad profile length in " + library_path;
    return false;
  }
  std::string text(static_cast<size_t>(length), '\0');
  in.seekg(start);
  in.read(text.data(), length);
  if (!in) {
    *error = "cannot read the profile embedded in " + library_path;
    return false;
  }
  if (!ParseNodeSpec(text, spec, error)) {
    *error = "profile embedded in " + library_path + ": " + *error;
    return false;
  }
  return true;
}

const GiProfile* FindGiProfileByIndex(const GpuSpec& gpu, unsigned int index) {
  if (!gpu.mig_table) return nullptr;
  for (const GiProfile& p : gpu.mig_table->profiles) {
    if (p.index == index) return &p;
  }
  return nullptr;
}

const GiProfile* FindGiProfileById(const GpuSpec& gpu, unsigned int id) {
  if (!gpu.mig_table) return nullptr;
  for (const GiProfile& p : gpu.mig_table->profiles) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

const CiProfile* FindCiProfile(const GiProfile& gi, unsigned int index) {
  for (const CiProfile& c : gi.compute_profiles) {
    if (c.index == index) return &c;
  }
  return nullptr;
}

}  // namespace mock_nvml
