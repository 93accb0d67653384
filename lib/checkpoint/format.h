#pragma once

// The on-disk format of the prepared-claims checkpoint, as pure functions (no I/O), so that the
// decoder can be fuzzed and the corruption policy in checkpoint.h stays separate.
//
//   {
//     "checksum": "fnv1a64:<16 hex digits>",
//     "data": {
//       "nodeBootID": "<boot id>",
//       "preparedClaims": {
//         "<claim uid>": {
//           "namespace": "...", "name": "...",
//           "state": "PrepareStarted" | "PrepareCompleted",
//           "allocation": <the claim's status.allocation, any JSON>,
//           "preparedDevices": <caller-defined JSON>,
//           "steps": <caller-defined JSON, optional>
//         }, ...
//       }
//     },
//     "version": 1
//   }
//
// The checksum is FNV-1a 64 over the canonical text of "data": nlohmann's compact dump, object
// keys sorted, which is stable across parse -> dump, so reformatting the file (jq, an editor)
// does not invalidate it but changing any value does.
//
// This is our own format: it is NOT compatible with the Go driver's checkpoint.json (which uses
// a "v1"/"v2" layout and an FNV-1a 32 checksum over a go-spew rendering). DecodeCheckpoint reads a
// Go-format file as corrupt (no "version"); checkpoint.h then adopts it through go_format.h.
//
// Compatibility rule for later changes: a field that older readers may ignore is added without
// changing "version" (decoders ignore unknown fields); anything that changes the meaning of an
// existing field bumps kFormatVersion, and older readers refuse the newer file.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace dra::checkpoint {

inline constexpr int kFormatVersion = 1;

enum class ClaimState { kPrepareStarted, kPrepareCompleted };

// "PrepareStarted" / "PrepareCompleted".
absl::string_view ClaimStateName(ClaimState state);

// One claim this node has started or finished preparing.
struct PreparedClaim {
  std::string uid;
  std::string namespace_name;
  std::string name;
  ClaimState state = ClaimState::kPrepareStarted;
  nlohmann::json allocation;        // the ResourceClaim's status.allocation; null when unknown
  nlohmann::json prepared_devices;  // opaque to this library; null when none
  // The record of the prepare's steps (lib/prepare/plan.h), opaque to this library; null in
  // entries written before steps were recorded and in adopted Go entries. JSON "steps", left out
  // when null, so that older readers (which ignore it) and newer ones agree on everything else.
  nlohmann::json steps;

  friend bool operator==(const PreparedClaim&, const PreparedClaim&) = default;
};

using ClaimMap = std::map<std::string, PreparedClaim>;  // keyed by uid

struct Contents {
  std::string node_boot_id;
  ClaimMap claims;

  friend bool operator==(const Contents&, const Contents&) = default;
};

// FNV-1a, 64-bit.
uint64_t Fnv1a64(absl::string_view data);

// The file text (pretty-printed, trailing newline). InvalidArgument when a claim's key and uid
// differ or a string (in the opaque JSON too) is not valid UTF-8.
absl::StatusOr<std::string> EncodeCheckpoint(const Contents& contents);

// What DecodeCheckpoint learnt before it failed, for the corruption report.
struct DecodeDiagnostics {
  std::optional<size_t> parse_error_offset;  // 0-based byte offset where the JSON went wrong
  std::string stored_checksum;               // set once the JSON parsed
  std::string computed_checksum;             // set once the JSON parsed and had "data"
};

// Decodes file text. Errors:
//   DataLoss            the text is corrupt: malformed JSON, missing or invalid "version",
//                       checksum mismatch, or "data" not of the documented shape;
//   FailedPrecondition  "version" is newer than kFormatVersion (written by a newer plugin).
// Messages are lower-case and name the offending field or offset. Never throws.
absl::StatusOr<Contents> DecodeCheckpoint(absl::string_view text,
                                          DecodeDiagnostics* diagnostics = nullptr);

}  // namespace dra::checkpoint
