#pragma once

// Fuzz targets of lib/cdplugin: what the compute-domain plugin reads back from its checkpoint
// beyond the checkpoint's own format (lib/checkpoint's target). Each takes any bytes, checks
// invariants and aborts on a violation (a crash is what a fuzzer reports); none may throw.
// Replayed with lib/cdplugin/fuzz_corpus/<target>/ by cdplugin_fuzz_replay_test, and built into a
// libFuzzer binary by the check preset through test/support/fuzz_main.cc:
//   build/check/lib/cdplugin/cdplugin_claim_records_fuzzer lib/cdplugin/fuzz_corpus/claim_records

#include <cstddef>
#include <cstdint>

namespace dra::cdplugin::fuzz {

// Bytes as the "preparedDevices" member of a claim's checkpoint entry (prepared_claim.h), decoded
// with either checkpoint state. A decoded record must survive ToCheckpoint and DecodeRecord
// unchanged (as its encoding).
void ClaimRecords(const uint8_t* data, size_t size);

}  // namespace dra::cdplugin::fuzz
