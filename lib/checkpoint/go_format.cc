#include "lib/checkpoint/go_format.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace dra::checkpoint {
namespace {

using OJson = nlohmann::ordered_json;

constexpr char kHex[] = "0123456789abcdef";

absl::Status Corrupt(absl::string_view what) { return absl::DataLossError(what); }

std::string ChecksumText(uint64_t sum) { return absl::StrCat("go-fnv1a32:", sum); }

// Go's encoding/json string encoding with HTML escaping (json.Marshal). The input is valid UTF-8
// (nlohmann's parser refuses anything else), so only U+2028 and U+2029 need a look at the
// multi-byte sequences.
void AppendGoString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
          (static_cast<unsigned char>(s[i + 2]) == 0xA8 ||
           static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
        out->append(static_cast<unsigned char>(s[i + 2]) == 0xA8 ? "\\u2028" : "\\u2029");
        i += 2;
      } else {
        out->push_back(static_cast<char>(c));
      }
      continue;
    }
    switch (c) {
      case '"':
      case '\\':
        out->push_back('\\');
        out->push_back(static_cast<char>(c));
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20 || c == '<' || c == '>' || c == '&') {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xF]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

void AppendGoJson(const OJson& v, std::string* out) {
  switch (v.type()) {
    case OJson::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (const auto& [key, value] : v.items()) {
        if (!first) out->push_back(',');
        first = false;
        AppendGoString(key, out);
        out->push_back(':');
        AppendGoJson(value, out);
      }
      out->push_back('}');
      return;
    }
    case OJson::value_t::array: {
      out->push_back('[');
      for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) out->push_back(',');
        AppendGoJson(v[i], out);
      }
      out->push_back(']');
      return;
    }
    case OJson::value_t::string:
      AppendGoString(v.get_ref<const std::string&>(), out);
      return;
    default:  // null, booleans and integers render alike; see the header for fractions
      out->append(v.dump());
  }
}

// A checksum field: a non-negative integer.
absl::StatusOr<uint64_t> ChecksumField(const OJson& obj, absl::string_view path) {
  auto it = obj.find("checksum");
  if (it == obj.end() || it->is_null()) return 0;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer() && it->get<int64_t>() >= 0) return it->get<uint64_t>();
  return Corrupt(absl::StrCat(path, "checksum: expected a non-negative integer"));
}

// Checks the checksum `stored` against `covered` (the value with its checksum set to 0).
absl::Status Verify(uint64_t stored, const OJson& covered, absl::string_view which,
                    DecodeDiagnostics& diag) {
  const uint64_t computed = GoChecksum(GoJsonMarshal(covered));
  if (computed == stored) return absl::OkStatus();
  diag.stored_checksum = ChecksumText(stored);
  diag.computed_checksum = ChecksumText(computed);
  return Corrupt(absl::StrCat("Go-format checkpoint: ", which, " checksum mismatch: stored ",
                              diag.stored_checksum, ", computed ", diag.computed_checksum));
}

absl::Status OptionalString(const OJson& obj, const char* key, const std::string& path,
                            std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return Corrupt(absl::StrCat(path, ".", key, ": expected string"));
  *out = it->get<std::string>();
  return absl::OkStatus();
}

// The claims of "v1" or "v2" (`section`).
absl::Status DecodeClaims(const OJson& section, const std::string& name, GoCheckpoint* out) {
  auto claims = section.find("preparedClaims");
  if (claims == section.end() || claims->is_null()) return absl::OkStatus();
  if (!claims->is_object()) return Corrupt(absl::StrCat(name, ".preparedClaims: expected object"));
  const bool v2 = name == "v2";
  for (const auto& [uid, entry] : claims->items()) {
    const std::string path = absl::StrCat(name, ".preparedClaims[\"", uid, "\"]");
    if (uid.empty()) return Corrupt(absl::StrCat(name, ".preparedClaims: empty claim uid"));
    if (!entry.is_object()) return Corrupt(absl::StrCat(path, ": expected object"));
    GoClaim claim;
    claim.uid = uid;
    if (v2) {
      std::string state;
      if (absl::Status s = OptionalString(entry, "checkpointState", path, &state); !s.ok()) {
        return s;
      }
      if (state == "PrepareCompleted") {
        claim.state = ClaimState::kPrepareCompleted;
      } else if (state != "PrepareStarted" && !state.empty()) {
        return Corrupt(absl::StrCat(path, ".checkpointState: unknown state \"", state, "\""));
      }
      if (absl::Status s = OptionalString(entry, "namespace", path, &claim.namespace_name);
          !s.ok()) {
        return s;
      }
      if (absl::Status s = OptionalString(entry, "name", path, &claim.name); !s.ok()) return s;
    } else {
      claim.state = ClaimState::kPrepareCompleted;
    }
    if (auto it = entry.find("status"); it != entry.end()) claim.status = nlohmann::json(*it);
    if (auto it = entry.find("preparedDevices"); it != entry.end()) {
      claim.prepared_devices = nlohmann::json(*it);
    }
    out->claims.emplace(uid, std::move(claim));
  }
  return absl::OkStatus();
}

bool IsObject(const OJson& root, const char* key) {
  auto it = root.find(key);
  return it != root.end() && it->is_object();
}

}  // namespace

uint32_t Fnv1a32(absl::string_view data) {
  uint32_t hash = 0x811c9dc5u;  // offset basis
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 0x01000193u;  // FNV prime
  }
  return hash;
}

uint32_t GoChecksum(absl::string_view json_text) {
  std::string rendering = "([]uint8)[";
  rendering.reserve(rendering.size() + json_text.size() * 4 + 1);
  for (size_t i = 0; i < json_text.size(); ++i) {
    if (i > 0) rendering.push_back(' ');
    absl::StrAppend(&rendering, static_cast<unsigned char>(json_text[i]));
  }
  rendering.push_back(']');
  return Fnv1a32(rendering);
}

std::string GoJsonMarshal(const nlohmann::ordered_json& value) {
  std::string out;
  AppendGoJson(value, &out);
  return out;
}

bool LooksLikeGoCheckpoint(absl::string_view text) {
  OJson root = OJson::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!root.is_object() || root.contains("version")) return false;
  auto checksum = root.find("checksum");
  if (checksum == root.end() || !checksum->is_number_integer()) return false;
  return IsObject(root, "v1") || IsObject(root, "v2");
}

absl::StatusOr<GoCheckpoint> DecodeGoCheckpoint(absl::string_view text,
                                                DecodeDiagnostics* diagnostics) {
  DecodeDiagnostics ignored;
  DecodeDiagnostics& diag = diagnostics ? *diagnostics : ignored;
  OJson root;
  try {
    root = OJson::parse(text.begin(), text.end());
  } catch (const OJson::parse_error& e) {
    const size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    diag.parse_error_offset = offset;
    return Corrupt(absl::StrCat("Go-format checkpoint: malformed JSON at byte ", offset));
  } catch (const std::exception& e) {
    return Corrupt(absl::StrCat("Go-format checkpoint: malformed JSON: ", e.what()));
  }
  if (!root.is_object()) return Corrupt("Go-format checkpoint: top level: expected object");
  if (root.contains("version")) return Corrupt("Go-format checkpoint: has a \"version\"");

  auto v2 = root.find("v2");
  const bool has_v2 = v2 != root.end() && !v2->is_null();
  if (has_v2 && !v2->is_object()) return Corrupt("Go-format checkpoint: v2: expected object");
  auto v1 = root.find("v1");
  const bool has_v1 = v1 != root.end() && !v1->is_null();
  if (has_v1 && !v1->is_object()) return Corrupt("Go-format checkpoint: v1: expected object");
  if (!has_v1 && !has_v2) return Corrupt("Go-format checkpoint: neither v1 nor v2");

  // The top-level checksum covers the file without "v2" and "v3" (newer Go drivers write a "v3"
  // beside them, and leave both out of this checksum) and with "checksum" 0.
  absl::StatusOr<uint64_t> stored = ChecksumField(root, "");
  if (!stored.ok()) return stored.status();
  OJson top = root;
  top.erase("v2");
  top.erase("v3");
  top["checksum"] = 0;
  if (absl::Status s = Verify(*stored, top, "top-level", diag); !s.ok()) return s;

  GoCheckpoint out;
  if (has_v2) {
    stored = ChecksumField(*v2, "v2.");
    if (!stored.ok()) return stored.status();
    OJson covered = *v2;
    covered["checksum"] = 0;
    if (absl::Status s = Verify(*stored, covered, "v2", diag); !s.ok()) return s;
    out.layout = "v2";
    if (absl::Status s = OptionalString(*v2, "nodeBootID", "v2", &out.node_boot_id); !s.ok()) {
      return s;
    }
    if (absl::Status s = DecodeClaims(*v2, "v2", &out); !s.ok()) return s;
  } else {
    out.layout = "v1";
    if (absl::Status s = DecodeClaims(*v1, "v1", &out); !s.ok()) return s;
  }
  return out;
}

}  // namespace dra::checkpoint
