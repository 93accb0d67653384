#pragma once

// The mutable part of a mock node (MIG mode and instances, compute mode, persistence mode,
// time-slice, injected events), persisted in <data dir>/state.json so that every process using the
// same driver root sees one machine. Readers take a shared flock on <data dir>/state.lock, writers
// an exclusive one; writes replace the file atomically (temp file, fsync, rename, fsync dir).
// While state.json does not exist, readers see the initial state derived from the profile
// (spec.h); the first write creates the file.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "test/doubles/mock-nvml/spec.h"

namespace mock_nvml {

struct CiState {
  unsigned int id = 0;
  unsigned int profile_index = 0;  // NVML_COMPUTE_INSTANCE_PROFILE_*
  unsigned int start = 0;          // compute slices inside the GPU instance
  unsigned int size = 0;
  std::string uuid;  // "MIG-..."
};

struct GiState {
  unsigned int id = 0;
  unsigned int profile_index = 0;  // NVML_GPU_INSTANCE_PROFILE_*
  unsigned int start = 0;          // memory slices
  unsigned int size = 0;
  std::vector<CiState> cis;  // sorted by id
};

struct GpuState {
  unsigned int mig_current = 0;
  unsigned int mig_pending = 0;
  std::vector<GiState> gis;  // sorted by id
  int compute_mode = 0;
  bool persistence = true;
  unsigned int timeslice = 0;        // nvidia-smi compute-policy --set-timeslice value
  unsigned long long creations = 0;  // compute instances ever created; seeds MIG UUIDs
};

// An event for nvmlEventSetWait, injected by a test (see README.md). Event sets deliver the
// events whose seq is above the highest seq present when the set was created.
struct InjectedEvent {
  unsigned long long seq = 0;
  std::string gpu_uuid;
  unsigned long long type = 0x8;  // nvmlEventTypeXidCriticalError
  unsigned long long data = 0;    // the XID
  unsigned int gpu_instance_id = 0xffffffff;
  unsigned int compute_instance_id = 0xffffffff;
};

struct State {
  std::map<std::string, GpuState> gpus;  // by GPU UUID
  std::vector<InjectedEvent> events;
};

// The state every GPU of `spec` starts from (its initial MIG mode and instances).
State InitialState(const NodeSpec& spec);

// Whether the GPU's initial MIG instances can all be created (profile validation).
bool ValidateInitialInstances(const GpuSpec& gpu, std::string* error);

std::string EncodeState(const State& state);
bool DecodeState(const std::string& text, State* state, std::string* error);

// Reads and writes state.json in one data directory. Thread-compatible; the caller serializes
// calls within a process (the mock holds its global mutex), flock serializes processes.
class StateStore {
 public:
  StateStore(std::string data_dir, const NodeSpec* spec)
      : data_dir_(std::move(data_dir)), spec_(spec) {}

  // Loads the current state (the profile's initial state while state.json is missing). Returns an
  // NVML return code; on failure `error` says why.
  int Read(State* out, std::string* error);

  // Read-modify-write under the exclusive lock. `fn` returns an NVML return code; the state is
  // written back (and `after_write` called, still under the lock) only when it returns SUCCESS.
  // `after_write` gets the state before `fn` (null when state.json did not exist yet) and after.
  int Mutate(const std::function<int(State&)>& fn,
             const std::function<void(const State* before, const State& after)>& after_write,
             std::string* error);

  std::string state_path() const { return data_dir_ + "/state.json"; }
  std::string lock_path() const { return data_dir_ + "/state.lock"; }

 private:
  int LoadLocked(State* out, bool* existed, std::string* error);
  int WriteLocked(const State& state, std::string* error);

  std::string data_dir_;
  const NodeSpec* spec_;
};

}  // namespace mock_nvml
