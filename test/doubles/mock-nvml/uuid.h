#pragma once

// UUID text helpers for the mock: deterministic UUIDs derived from a seed string (so a profile
// needs no hand-made MIG UUIDs) and parsing of "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".

#include <string>

namespace mock_nvml {

// "<prefix><8>-<4>-<4>-<4>-<12>" from a 128-bit hash of `seed`, with the version nibble set to 5
// and the RFC 4122 variant bits, so the result looks like the name-based UUIDs NVIDIA drivers
// print.
std::string MakeUuid(const std::string& prefix, const std::string& seed);

// Parses the 32 hex digits of a UUID (dashes ignored, an optional "GPU-"/"MIG-" prefix skipped)
// into 16 bytes. Returns false on anything else.
bool ParseUuidBytes(const std::string& text, unsigned char* out16);

}  // namespace mock_nvml
