// A fake nvidia-smi for tests and containers, built on NVML (dlopen of libnvidia-ml.so.1). See
// smi.h for what is visible and nvml_client.h for how the library is found.
//
//   nvidia-smi                                   a short summary table
//   nvidia-smi --version
//   nvidia-smi -L | --list-gpus                  GPUs and MIG devices with UUIDs
//   nvidia-smi -q | --query [-i ID]              a few attributes per GPU
//   nvidia-smi [-i ID] -c | --compute-mode MODE  DEFAULT|PROHIBITED|EXCLUSIVE_PROCESS or 0|2|3
//   nvidia-smi [-i ID] -pm | --persistence-mode 0|1|DISABLED|ENABLED
//   nvidia-smi compute-policy [-i ID] --set-timeslice N    N in 0..3 (Default..Long)
//   nvidia-smi compute-policy [-i ID] -l | --list
//   nvidia-smi --mock-inject-xid GPU-UUID XID [GI CI]   mock only: queue an XID event for NVML
//                                                waiters (of a MIG device: its GPU/compute
//                                                instance)
// ID is a visible index, a GPU UUID or a PCI bus id; several may be given comma-separated.

#include <cstdio>
#include <string>
#include <vector>

#include "test/doubles/nvidia-smi/smi.h"

namespace {

constexpr const char* kUsage =
    "NVIDIA System Management Interface (mock)\n\n"
    "    nvidia-smi [OPTION1 [ARG1]] [OPTION2 [ARG2]] ...\n\n"
    "    -h,   --help                Print usage information and exit.\n"
    "          --version             Print version information and exit.\n"
    "    -L,   --list-gpus           Display a list of GPUs connected to the system.\n"
    "    -q,   --query               Display GPU info.\n"
    "    -i,   --id=                 Target a specific GPU (index, UUID or PCI bus id).\n"
    "    -c,   --compute-mode=       Set MODE for compute applications:\n"
    "                                0/DEFAULT, 2/PROHIBITED, 3/EXCLUSIVE_PROCESS\n"
    "    -pm,  --persistence-mode=   Set persistence mode: 0/DISABLED, 1/ENABLED\n"
    "    compute-policy [-i ID] --set-timeslice=N | -l\n"
    "                                Set (N = 0 default, 1 short, 2 medium, 3 long) or list the\n"
    "                                compute time-slice.\n"
    "    --mock-inject-xid UUID XID [GI CI]\n"
    "                                Mock only: queue an XID event for the GPU (with GI and CI:\n"
    "                                for its MIG device of that GPU and compute instance).\n";

constexpr const char* kBadArguments =
    "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n";

struct Options {
  bool help = false, version = false, list = false, query = false;
  bool compute_policy = false, policy_list = false;
  std::string ids, compute_mode, persistence_mode, timeslice, inject_uuid, inject_xid;
  std::string inject_gi, inject_ci;  // empty: the full GPU
  bool has_compute_mode = false, has_persistence_mode = false, has_timeslice = false;
  bool inject = false;
};

// Matches "-x VALUE", "--long VALUE" and "--long=VALUE"; advances `i` past a separate value.
bool TakeValue(const std::vector<std::string>& args, size_t& i, const char* short_name,
               const char* long_name, std::string* value, bool* ok) {
  const std::string& arg = args[i];
  const std::string long_eq = std::string(long_name) + "=";
  if (arg.rfind(long_eq, 0) == 0) {
    *value = arg.substr(long_eq.size());
    return true;
  }
  if ((short_name != nullptr && arg == short_name) || arg == long_name) {
    if (i + 1 >= args.size()) {
      *ok = false;
      return true;
    }
    *value = args[++i];
    return true;
  }
  return false;
}

bool Parse(const std::vector<std::string>& args, Options* o) {
  bool ok = true;
  size_t i = 0;
  if (!args.empty() && args[0] == "compute-policy") {
    o->compute_policy = true;
    i = 1;
  }
  for (; i < args.size() && ok; ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      o->help = true;
    } else if (a == "--version") {
      o->version = true;
    } else if (a == "-L" || a == "--list-gpus") {
      o->list = true;
    } else if (a == "-q" || a == "--query") {
      o->query = true;
    } else if (o->compute_policy && (a == "-l" || a == "--list")) {
      o->policy_list = true;
    } else if (TakeValue(args, i, "-i", "--id", &o->ids, &ok)) {
    } else if (TakeValue(args, i, "-c", "--compute-mode", &o->compute_mode, &ok)) {
      o->has_compute_mode = true;
    } else if (TakeValue(args, i, "-pm", "--persistence-mode", &o->persistence_mode, &ok)) {
      o->has_persistence_mode = true;
    } else if (o->compute_policy &&
               TakeValue(args, i, nullptr, "--set-timeslice", &o->timeslice, &ok)) {
      o->has_timeslice = true;
    } else if (a == "--mock-inject-xid" && i + 2 < args.size()) {
      o->inject = true;
      o->inject_uuid = args[++i];
      o->inject_xid = args[++i];
      if (i + 2 < args.size() && args[i + 1].find_first_not_of("0123456789") == std::string::npos &&
          args[i + 2].find_first_not_of("0123456789") == std::string::npos) {
        o->inject_gi = args[++i];
        o->inject_ci = args[++i];
      }
    } else {
      ok = false;
    }
  }
  if (o->compute_policy && o->has_timeslice == o->policy_list) ok = false;
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  Options o;
  if (!Parse(args, &o)) {
    std::fprintf(stderr, "%s", kBadArguments);
    return 2;
  }
  if (o.help) {
    std::printf("%s", kUsage);
    return 0;
  }
  fake_smi::Smi smi;
  if (int rc = smi.Init(); rc != 0) return rc;
  if (o.version) return smi.Version();
  if (o.inject) return smi.InjectEvent(o.inject_uuid, o.inject_xid, o.inject_gi, o.inject_ci);
  if (o.compute_policy) {
    return o.has_timeslice ? smi.SetTimeslice(o.ids, o.timeslice) : smi.ListTimeslice(o.ids);
  }
  if (o.has_compute_mode) return smi.SetComputeMode(o.ids, o.compute_mode);
  if (o.has_persistence_mode) return smi.SetPersistenceMode(o.ids, o.persistence_mode);
  if (o.list) return smi.List();
  if (o.query) return smi.Query(o.ids);
  return smi.Summary();
}
