#include "lib/checkpoint/format.h"

#include <cinttypes>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dra::checkpoint {
namespace {

using Json = nlohmann::json;

constexpr absl::string_view kChecksumPrefix = "fnv1a64:";

std::string ChecksumText(uint64_t sum) {
  return absl::StrCat(kChecksumPrefix, absl::StrFormat("%016x", sum));
}

absl::Status Corrupt(absl::string_view what) { return absl::DataLossError(what); }

// The canonical text the checksum covers. Throws nlohmann::json::type_error on invalid UTF-8.
std::string Canonical(const Json& data) { return data.dump(); }

absl::StatusOr<ClaimState> ParseState(const Json& j, const std::string& path) {
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "PrepareStarted") return ClaimState::kPrepareStarted;
    if (s == "PrepareCompleted") return ClaimState::kPrepareCompleted;
  }
  return Corrupt(absl::StrCat(path, ": expected \"PrepareStarted\" or \"PrepareCompleted\", got ",
                              j.dump(-1, ' ', false, Json::error_handler_t::replace)));
}

absl::Status OptionalString(const Json& obj, const char* key, const std::string& path,
                            std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return Corrupt(absl::StrCat(path, ".", key, ": expected string"));
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::StatusOr<Contents> DecodeData(const Json& data) {
  if (!data.is_object()) return Corrupt("data: expected object");
  Contents out;
  if (absl::Status s = OptionalString(data, "nodeBootID", "data", &out.node_boot_id); !s.ok()) {
    return s;
  }
  auto claims = data.find("preparedClaims");
  if (claims == data.end() || claims->is_null()) return out;
  if (!claims->is_object()) return Corrupt("data.preparedClaims: expected object");
  for (const auto& [uid, entry] : claims->items()) {
    const std::string path = absl::StrCat("data.preparedClaims[\"", uid, "\"]");
    if (uid.empty()) return Corrupt("data.preparedClaims: empty claim uid");
    if (!entry.is_object()) return Corrupt(absl::StrCat(path, ": expected object"));
    PreparedClaim claim;
    claim.uid = uid;
    for (auto [key, dest] :
         {std::pair{"namespace", &claim.namespace_name}, std::pair{"name", &claim.name}}) {
      if (absl::Status s = OptionalString(entry, key, path, dest); !s.ok()) return s;
    }
    auto state = entry.find("state");
    if (state == entry.end()) return Corrupt(absl::StrCat(path, ".state: missing"));
    absl::StatusOr<ClaimState> parsed = ParseState(*state, path + ".state");
    if (!parsed.ok()) return parsed.status();
    claim.state = *parsed;
    if (auto it = entry.find("allocation"); it != entry.end()) claim.allocation = *it;
    if (auto it = entry.find("preparedDevices"); it != entry.end()) claim.prepared_devices = *it;
    if (auto it = entry.find("steps"); it != entry.end()) claim.steps = *it;
    out.claims.emplace(uid, std::move(claim));
  }
  return out;
}

}  // namespace

absl::string_view ClaimStateName(ClaimState state) {
  switch (state) {
    case ClaimState::kPrepareStarted:
      return "PrepareStarted";
    case ClaimState::kPrepareCompleted:
      return "PrepareCompleted";
  }
  return "Unknown";
}

uint64_t Fnv1a64(absl::string_view data) {
  uint64_t hash = 0xcbf29ce484222325ULL;  // offset basis
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 0x100000001b3ULL;  // FNV prime
  }
  return hash;
}

absl::StatusOr<std::string> EncodeCheckpoint(const Contents& contents) {
  Json claims = Json::object();
  for (const auto& [uid, claim] : contents.claims) {
    if (uid.empty() || claim.uid != uid) {
      return absl::InvalidArgumentError(
          absl::StrCat("encode checkpoint: claim keyed \"", uid, "\" has uid \"", claim.uid, "\""));
    }
    Json entry = Json::object();
    if (!claim.namespace_name.empty()) entry["namespace"] = claim.namespace_name;
    if (!claim.name.empty()) entry["name"] = claim.name;
    entry["state"] = std::string(ClaimStateName(claim.state));
    if (!claim.allocation.is_null()) entry["allocation"] = claim.allocation;
    if (!claim.prepared_devices.is_null()) entry["preparedDevices"] = claim.prepared_devices;
    if (!claim.steps.is_null()) entry["steps"] = claim.steps;
    claims[uid] = std::move(entry);
  }
  Json data = {{"nodeBootID", contents.node_boot_id}, {"preparedClaims", std::move(claims)}};
  try {
    const std::string checksum = ChecksumText(Fnv1a64(Canonical(data)));
    // "version" first for readers of the file; "data" keeps its sorted keys.
    nlohmann::ordered_json file = nlohmann::ordered_json::object();
    file["version"] = kFormatVersion;
    file["checksum"] = checksum;
    file["data"] = nlohmann::ordered_json(data);
    return file.dump(2) + "\n";
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("encode checkpoint: ", e.what()));
  }
}

absl::StatusOr<Contents> DecodeCheckpoint(absl::string_view text, DecodeDiagnostics* diagnostics) {
  DecodeDiagnostics ignored;
  DecodeDiagnostics& diag = diagnostics ? *diagnostics : ignored;
  Json root;
  try {
    root = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // e.what(): "[json.exception.parse_error.N] parse error at line L, column C: <reason>".
    std::string what = e.what();
    if (size_t colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
    // nlohmann counts bytes from 1; report the 0-based offset (the file size for a truncation).
    const size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    diag.parse_error_offset = offset;
    return Corrupt(absl::StrCat("malformed JSON at byte ", offset, ": ", what));
  } catch (const std::exception& e) {
    return Corrupt(absl::StrCat("malformed JSON: ", e.what()));
  }
  if (!root.is_object()) return Corrupt("top level: expected object");

  auto version = root.find("version");
  if (version == root.end()) return Corrupt("version: missing (not a checkpoint of this format)");
  if (!version->is_number_integer() || version->get<int64_t>() < 1) {
    return Corrupt(absl::StrCat("version: expected a positive integer, got ",
                                version->dump(-1, ' ', false, Json::error_handler_t::replace)));
  }
  if (version->get<int64_t>() > kFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint format version ", version->get<int64_t>(),
                     " is newer than the newest this plugin reads (", kFormatVersion, ")"));
  }

  auto checksum = root.find("checksum");
  if (checksum == root.end() || !checksum->is_string()) {
    return Corrupt("checksum: missing or not a string");
  }
  diag.stored_checksum = checksum->get<std::string>();
  auto data = root.find("data");
  if (data == root.end()) return Corrupt("data: missing");
  try {
    diag.computed_checksum = ChecksumText(Fnv1a64(Canonical(*data)));
  } catch (const Json::exception& e) {  // unreachable for parsed input; be defensive
    return Corrupt(absl::StrCat("data: ", e.what()));
  }
  if (diag.stored_checksum != diag.computed_checksum) {
    return Corrupt(absl::StrCat("checksum mismatch: stored ", diag.stored_checksum, ", computed ",
                                diag.computed_checksum));
  }
  return DecodeData(*data);
}

}  // namespace dra::checkpoint
