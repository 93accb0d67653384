#pragma once

// The public Go driver's checkpoint.json, read so that a node switched from the Go driver keeps
// its prepared claims (docs/checkpoint-format.md "Adopting the Go driver's checkpoint"). Pure
// functions, no I/O; the adoption itself (rewriting the file in our format) is in checkpoint.cc.
//
// Facts of the format this relies on:
//   {"checksum": <uint>,                           covers the file without "v2" and "v3"
//    "v1": {"preparedClaims": {<uid>: {"status", "preparedDevices"}}},            optional
//    "v2": {"checksum": <uint>, "preparedClaims": {<uid>: {"checkpointState", "status",
//           "preparedDevices", "name", "namespace"}}, "nodeBootID": "..."},       optional
//    "v3": {...}}   newer Go drivers: the v2 claims again, with a device record of their own;
//                   not read here (its checksum neither), "v2" is
// The Go plugin writes the file with Go's encoding/json (compact, struct field order) and checks
// each checksum by marshalling its decoded value again, with that checksum set to 0. A checksum
// is FNV-1a 32 over the text "([]uint8)[b0 b1 ...]" (go-spew's rendering of the JSON bytes, in
// decimal, separated by spaces). Since every field of the file is one the Go structs know, the
// re-marshalled text equals the file's JSON with the file's key order; GoJsonMarshal reproduces it
// from a parsed value, so a re-indented file still verifies, while a changed value does not.
// Limitation: JSON numbers with a fraction or exponent (none in the fields the Go driver writes)
// may render differently from Go's.
//
// The device list of a claim ("preparedDevices": groups of devices with their "configState") is
// returned as it is: what it means is for the caller (lib/gpuplugin) to decide.

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/checkpoint/format.h"
#include "nlohmann/json.hpp"

namespace dra::checkpoint {

// FNV-1a, 32-bit.
uint32_t Fnv1a32(absl::string_view data);

// The Go checkpoint checksum of JSON text: Fnv1a32 of "([]uint8)[b0 b1 ...]".
uint32_t GoChecksum(absl::string_view json_text);

// The text Go's encoding/json (json.Marshal: compact, HTML characters escaped) produces for
// `value`, object keys in the order `value` holds them.
std::string GoJsonMarshal(const nlohmann::ordered_json& value);

// One claim of a Go checkpoint.
struct GoClaim {
  std::string uid;
  std::string namespace_name;  // often empty: the Go driver drops it at PrepareCompleted
  std::string name;
  // v2 "checkpointState"; a v1-only file's claims are PrepareCompleted. An unset state (""), which
  // the Go driver never leaves on disk, reads as PrepareStarted so that unprepare undoes it.
  ClaimState state = ClaimState::kPrepareStarted;
  nlohmann::json status;            // the ResourceClaim status as the Go driver saw it
  nlohmann::json prepared_devices;  // the Go device groups, unconverted; null when absent
};

struct GoCheckpoint {
  std::string layout;        // "v2", or "v1" for a file without "v2"
  std::string node_boot_id;  // empty for a v1-only file
  std::map<std::string, GoClaim> claims;
};

// True when `text` is a JSON object laid out as a Go checkpoint: no "version", a numeric
// "checksum", and a "v1" or "v2" object. Says nothing about the checksums.
bool LooksLikeGoCheckpoint(absl::string_view text);

// Decodes a Go checkpoint after verifying both checksums (the top-level one, and the "v2" one
// when "v2" is present). DataLoss for anything wrong (not JSON, not the Go layout, a checksum
// mismatch, a claim of the wrong shape), naming the field; `diagnostics` gets the stored and the
// computed checksum of the first mismatch ("go-fnv1a32:<decimal>").
absl::StatusOr<GoCheckpoint> DecodeGoCheckpoint(absl::string_view text,
                                                DecodeDiagnostics* diagnostics = nullptr);

}  // namespace dra::checkpoint
