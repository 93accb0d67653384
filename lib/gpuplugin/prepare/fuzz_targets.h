#pragma once

// Fuzz targets of lib/gpuplugin: what the GPU plugin reads back from its checkpoint beyond the
// checkpoint's own format (lib/checkpoint's target): the records in a claim's opaque entry.
// Each takes any bytes, checks invariants and aborts on a violation (a crash is what a fuzzer
// reports); none may throw. Replayed with lib/gpuplugin/prepare/fuzz_corpus/<target>/ by
// gpu_fuzz_replay_test, and built into a libFuzzer binary by the check preset through
// test/support/fuzz_main.cc:
//   build/check/lib/gpuplugin/prepare/gpu_checkpoint_records_fuzzer
//   lib/gpuplugin/prepare/fuzz_corpus/records

#include <cstddef>
#include <cstdint>

namespace dra::gpu::fuzz {

// Bytes as JSON, decoded as each record kind: the prepared devices (prepared.h), the step records
// (lib/prepare/plan.h) and, within them and on their own, the undo data of the MPS daemon, VFIO and
// device-status steps (mps_daemon.h, vfio_bind.h, device_status.h). A decoded record must encode,
// decode again and encode to the same JSON.
void CheckpointRecords(const uint8_t* data, size_t size);

}  // namespace dra::gpu::fuzz
