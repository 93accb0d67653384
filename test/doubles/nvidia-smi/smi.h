#pragma once

// The commands of the fake nvidia-smi. Visibility follows device nodes, as in a container: a GPU
// is listed only if <dev>/nvidia<minor> exists, and a MIG device only if its GPU is visible and
// both <dev>/nvidia-caps/nvidia-cap<GI minor> and <CI minor> exist. Visible GPUs are numbered from
// 0 in NVML order, like NVML numbers the GPUs a container can open.
//
// Exit codes follow nvidia-smi: 0 ok, 2 bad arguments, 6 no (matching) device, 9 no driver, and
// otherwise the NVML return code of the failed call.

#include <string>
#include <vector>

#include "test/doubles/nvidia-smi/nvml_client.h"

namespace fake_smi {

struct Gpu {
  abi::DeviceHandle handle = nullptr;
  unsigned int index = 0;  // among visible GPUs
  unsigned int minor = 0;
  std::string uuid;
  std::string name;
  std::string bus_id;  // "00000000:18:00.0"
};

struct MigDevice {
  unsigned int index = 0;  // among the GPU's visible MIG devices
  std::string profile;     // "1g.5gb"
  std::string uuid;
};

class Smi {
 public:
  // Loads and initializes NVML; prints nvidia-smi's driver failure text and returns 9 (or another
  // exit code) on failure, 0 on success.
  int Init();
  ~Smi();

  std::vector<Gpu> VisibleGpus();
  // Resolves -i: comma-separated visible indexes, GPU UUIDs or PCI bus ids ("" selects all).
  // Prints "No devices were found" and returns 6 when one does not match.
  int Select(const std::string& ids, std::vector<Gpu>* out);
  std::vector<MigDevice> VisibleMigDevices(const Gpu& gpu);

  int List();                                                               // -L
  int Query(const std::string& ids);                                        // -q [-i]
  int Summary();                                                            // no arguments
  int Version();                                                            // --version
  int SetComputeMode(const std::string& ids, const std::string& mode);      // -c
  int SetPersistenceMode(const std::string& ids, const std::string& mode);  // -pm
  int SetTimeslice(const std::string& ids, const std::string& value);       // compute-policy
  int ListTimeslice(const std::string& ids);                                // compute-policy -l
  // --mock-inject-xid; `gi`/`ci` empty: the full GPU.
  int InjectEvent(const std::string& uuid, const std::string& xid, const std::string& gi = "",
                  const std::string& ci = "");

 private:
  int Fail(const std::string& what, abi::Return ret);

  NvmlClient nvml_;
  bool initialized_ = false;
  std::string dev_dir_;
};

}  // namespace fake_smi
