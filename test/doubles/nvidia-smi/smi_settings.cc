// -q and the commands that change settings: -c (compute mode), -pm (persistence mode) and
// compute-policy --set-timeslice (kept by the mock library in its state file).

#include <cstdio>
#include <cstdlib>
#include <map>

#include "test/doubles/nvidia-smi/smi.h"

namespace fake_smi {
namespace {

const char* ComputeModeName(int mode) {
  switch (mode) {
    case abi::kComputeModeDefault:
      return "Default";
    case abi::kComputeModeExclusiveThread:
      return "Exclusive_Thread";
    case abi::kComputeModeProhibited:
      return "Prohibited";
    case abi::kComputeModeExclusiveProcess:
      return "Exclusive_Process";
    default:
      return "Unknown";
  }
}

const char* TimesliceName(unsigned int value) {
  static constexpr const char* kNames[] = {"Default", "Short", "Medium", "Long"};
  return value < 4 ? kNames[value] : "Unknown";
}

// -c values: names and numbers, as nvidia-smi accepts them.
const std::map<std::string, int> kComputeModes = {
    {"DEFAULT", abi::kComputeModeDefault},
    {"0", abi::kComputeModeDefault},
    {"EXCLUSIVE_THREAD", abi::kComputeModeExclusiveThread},
    {"1", abi::kComputeModeExclusiveThread},
    {"PROHIBITED", abi::kComputeModeProhibited},
    {"2", abi::kComputeModeProhibited},
    {"EXCLUSIVE_PROCESS", abi::kComputeModeExclusiveProcess},
    {"3", abi::kComputeModeExclusiveProcess}};

const char* ArchitectureName(unsigned int arch) {
  switch (arch) {
    case abi::kArchKepler:
      return "Kepler";
    case abi::kArchMaxwell:
      return "Maxwell";
    case abi::kArchPascal:
      return "Pascal";
    case abi::kArchVolta:
      return "Volta";
    case abi::kArchTuring:
      return "Turing";
    case abi::kArchAmpere:
      return "Ampere";
    case abi::kArchAda:
      return "Ada Lovelace";
    case abi::kArchHopper:
      return "Hopper";
    case abi::kArchBlackwell:
      return "Blackwell";
    case abi::kArchRubin:
      return "Rubin";
    default:
      return "Unknown";
  }
}

const char* BrandName(int brand) {
  switch (brand) {
    case abi::kBrandTesla:
      return "Tesla";
    case abi::kBrandQuadro:
      return "Quadro";
    case abi::kBrandGeforce:
      return "GeForce";
    case abi::kBrandNvidia:
      return "NVIDIA";
    case abi::kBrandNvidiaRtx:
      return "NVIDIA RTX";
    default:
      return "Unknown";
  }
}

// "    Label<padding>: value", the label column 42 wide as nvidia-smi -q prints it.
void Field(int indent, const std::string& label, const std::string& value) {
  std::string left = std::string(indent, ' ') + label;
  if (left.size() < 42) left.resize(42, ' ');
  std::printf("%s: %s\n", left.c_str(), value.c_str());
}

void Heading(int indent, const std::string& label) {
  std::printf("%s%s\n", std::string(indent, ' ').c_str(), label.c_str());
}

}  // namespace

int Smi::Query(const std::string& ids) {
  std::vector<Gpu> gpus;
  if (int rc = Select(ids, &gpus); rc != 0) return rc;
  char version[abi::kSystemDriverVersionBufferSize] = "";
  nvml_.system_get_driver_version(version, sizeof(version));
  int cuda = 0;
  if (nvml_.system_get_cuda_driver_version) nvml_.system_get_cuda_driver_version(&cuda);
  std::printf("\n==============NVSMI LOG==============\n\n");
  Field(0, "Driver Version", version);
  Field(0, "CUDA Version", std::to_string(cuda / 1000) + "." + std::to_string(cuda % 1000 / 10));
  std::printf("\n");
  Field(0, "Attached GPUs", std::to_string(VisibleGpus().size()));
  for (const Gpu& gpu : gpus) {
    std::printf("GPU %s\n", gpu.bus_id.c_str());
    Field(4, "Product Name", gpu.name);
    int brand = 0;
    unsigned int arch = 0;
    if (nvml_.device_get_brand && nvml_.device_get_brand(gpu.handle, &brand) == abi::kSuccess) {
      Field(4, "Product Brand", BrandName(brand));
    }
    if (nvml_.device_get_architecture &&
        nvml_.device_get_architecture(gpu.handle, &arch) == abi::kSuccess) {
      Field(4, "Product Architecture", ArchitectureName(arch));
    }
    int persistence = 0;
    if (nvml_.device_get_persistence_mode &&
        nvml_.device_get_persistence_mode(gpu.handle, &persistence) == abi::kSuccess) {
      Field(4, "Persistence Mode", persistence == abi::kFeatureEnabled ? "Enabled" : "Disabled");
    }
    unsigned int current = 0, pending = 0;
    Heading(4, "MIG Mode");
    if (nvml_.device_get_mig_mode &&
        nvml_.device_get_mig_mode(gpu.handle, &current, &pending) == abi::kSuccess) {
      Field(8, "Current", current == abi::kDeviceMigEnable ? "Enabled" : "Disabled");
      Field(8, "Pending", pending == abi::kDeviceMigEnable ? "Enabled" : "Disabled");
    } else {
      Field(8, "Current", "N/A");
      Field(8, "Pending", "N/A");
    }
    Field(4, "GPU UUID", gpu.uuid);
    Field(4, "Minor Number", std::to_string(gpu.minor));
    abi::MemoryV2 memory{};
    memory.version = abi::kMemoryV2Version;
    if (nvml_.device_get_memory_info_v2 &&
        nvml_.device_get_memory_info_v2(gpu.handle, &memory) == abi::kSuccess) {
      Heading(4, "FB Memory Usage");
      Field(8, "Total", std::to_string(memory.total >> 20) + " MiB");
      Field(8, "Reserved", std::to_string(memory.reserved >> 20) + " MiB");
      // NVML's used includes reserved; nvidia-smi shows them apart (total = reserved+used+free).
      Field(8, "Used", std::to_string((memory.used - memory.reserved) >> 20) + " MiB");
      Field(8, "Free", std::to_string(memory.free >> 20) + " MiB");
    }
    int mode = 0;
    if (nvml_.device_get_compute_mode &&
        nvml_.device_get_compute_mode(gpu.handle, &mode) == abi::kSuccess) {
      Field(4, "Compute Mode", ComputeModeName(mode));
    }
    unsigned int timeslice = 0;
    if (nvml_.mock_get_timeslice &&
        nvml_.mock_get_timeslice(gpu.handle, &timeslice) == abi::kSuccess) {
      Field(4, "Compute Timeslice", TimesliceName(timeslice));
    }
    std::printf("\n");
  }
  return 0;
}

int Smi::SetComputeMode(const std::string& ids, const std::string& mode_text) {
  auto it = kComputeModes.find(mode_text);
  if (it == kComputeModes.end() || nvml_.device_set_compute_mode == nullptr) {
    std::fprintf(stderr, "Invalid compute mode: %s\n", mode_text.c_str());
    return 2;
  }
  static constexpr const char* kNames[] = {"DEFAULT", "EXCLUSIVE_THREAD", "PROHIBITED",
                                           "EXCLUSIVE_PROCESS"};
  std::vector<Gpu> gpus;
  if (int rc = Select(ids, &gpus); rc != 0) return rc;
  for (const Gpu& gpu : gpus) {
    if (abi::Return ret = nvml_.device_set_compute_mode(gpu.handle, it->second);
        ret != abi::kSuccess) {
      return Fail("Unable to set the compute mode for GPU " + gpu.bus_id, ret);
    }
    std::printf("Set compute mode to %s for GPU %s.\n", kNames[it->second], gpu.bus_id.c_str());
  }
  std::printf("All done.\n");
  return 0;
}

int Smi::SetPersistenceMode(const std::string& ids, const std::string& mode_text) {
  int mode = -1;
  if (mode_text == "1" || mode_text == "ENABLED") mode = abi::kFeatureEnabled;
  if (mode_text == "0" || mode_text == "DISABLED") mode = abi::kFeatureDisabled;
  if (mode < 0 || nvml_.device_set_persistence_mode == nullptr) {
    std::fprintf(stderr, "Invalid persistence mode: %s\n", mode_text.c_str());
    return 2;
  }
  std::vector<Gpu> gpus;
  if (int rc = Select(ids, &gpus); rc != 0) return rc;
  for (const Gpu& gpu : gpus) {
    if (abi::Return ret = nvml_.device_set_persistence_mode(gpu.handle, mode);
        ret != abi::kSuccess) {
      return Fail("Unable to set persistence mode for GPU " + gpu.bus_id, ret);
    }
    std::printf("%s persistence mode for GPU %s.\n",
                mode == abi::kFeatureEnabled ? "Enabled" : "Disabled", gpu.bus_id.c_str());
  }
  std::printf("All done.\n");
  return 0;
}

int Smi::SetTimeslice(const std::string& ids, const std::string& value) {
  char* end = nullptr;
  const unsigned long n = std::strtoul(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || n > 3) {
    std::fprintf(stderr, "Invalid timeslice value: %s (allowed: 0..3)\n", value.c_str());
    return 2;
  }
  if (nvml_.mock_set_timeslice == nullptr) {
    std::fprintf(stderr, "Setting the timeslice needs the mock libnvidia-ml.so.1\n");
    return abi::kErrorNotSupported;
  }
  std::vector<Gpu> gpus;
  if (int rc = Select(ids, &gpus); rc != 0) return rc;
  for (const Gpu& gpu : gpus) {
    if (abi::Return ret = nvml_.mock_set_timeslice(gpu.handle, static_cast<unsigned int>(n));
        ret != abi::kSuccess) {
      return Fail("Unable to set the timeslice for GPU " + gpu.bus_id, ret);
    }
    std::printf("Set timeslice to %lu (%s) for GPU %s.\n", n,
                TimesliceName(static_cast<unsigned int>(n)), gpu.bus_id.c_str());
  }
  std::printf("All done.\n");
  return 0;
}

int Smi::ListTimeslice(const std::string& ids) {
  std::vector<Gpu> gpus;
  if (int rc = Select(ids, &gpus); rc != 0) return rc;
  for (const Gpu& gpu : gpus) {
    unsigned int value = 0;
    if (nvml_.mock_get_timeslice == nullptr ||
        nvml_.mock_get_timeslice(gpu.handle, &value) != abi::kSuccess) {
      continue;
    }
    std::printf("GPU %u  Timeslice  %s\n", gpu.index, TimesliceName(value));
  }
  return 0;
}

}  // namespace fake_smi
