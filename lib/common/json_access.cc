#include "lib/common/json_access.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "lib/common/json_depth.h"

namespace dra::json_access {
namespace {

bool IsPlainKey(absl::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

}  // namespace

// json_depth.h. A scan of the bytes, so that a hostile document is refused before nlohmann builds
// (and later recursively copies, dumps or compares) a value that deep.
int NestingDepth(absl::string_view text, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '{':
      case '[':
        deepest = std::max(deepest, ++depth);
        if (deepest > limit) return deepest;
        break;
      case '}':
      case ']':
        --depth;
        break;
      default:
        break;
    }
  }
  return deepest;
}

namespace {

const Json& Null() {
  static const Json* const kNull = new Json();
  return *kNull;
}

// The member `key` of `obj` at `path`: nullptr when absent or null, an error when `obj` is not
// an object.
absl::StatusOr<const Json*> Member(const Json& obj, absl::string_view path, absl::string_view key) {
  if (!obj.is_object()) return TypeError(path, "object", obj);
  return Find(obj, key);
}

absl::Status Missing(absl::string_view path, absl::string_view key) {
  return absl::InvalidArgumentError(
      absl::StrCat(MemberPath(path, key), ": required field is missing"));
}

// Builds a Json from nlohmann's SAX events (the SAX parser keeps its nesting on a heap stack, not
// the call stack), replacing every container deeper than `max_depth` with null. The containers
// being filled are held by pointer: only the innermost one grows, so the outer pointers stay valid.
class CuttingBuilder {
 public:
  CuttingBuilder(int max_depth, int report_steps, std::set<std::string>* cut_at)
      : max_depth_(max_depth), report_steps_(report_steps), cut_at_(cut_at) {}

  Json Take() { return std::move(root_); }

  bool null() { return Put(Json()); }
  bool boolean(bool v) { return Put(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return Put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return Put(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t& /*text*/) { return Put(Json(v)); }
  bool string(Json::string_t& v) { return Put(Json(std::move(v))); }
  bool binary(Json::binary_t& /*v*/) { return false; }  // JSON text has none
  bool start_object(std::size_t /*size*/) { return Open(Json::object()); }
  bool start_array(std::size_t /*size*/) { return Open(Json::array()); }
  bool key(Json::string_t& k) {
    if (skipping_ == 0) open_.back().key = k;
    return true;
  }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& /*e*/) {
    return false;
  }

 private:
  struct Level {
    Json* container;
    std::string key;  // the member being read, when `container` is an object
  };

  // Stores `v` in the innermost open container (or as the root); returns where it went.
  Json* Store(Json v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Level& top = open_.back();
    if (top.container->is_array()) {
      top.container->push_back(std::move(v));
      return &top.container->back();
    }
    Json& slot = (*top.container)[top.key];
    slot = std::move(v);
    return &slot;
  }
  bool Put(Json v) {
    if (skipping_ == 0) Store(std::move(v));
    return true;
  }
  bool Open(Json empty) {
    if (skipping_ > 0) {
      ++skipping_;
      return true;
    }
    if (static_cast<int>(open_.size()) + 1 > max_depth_) {
      Store(Json());
      skipping_ = 1;
      RecordCut();
      return true;
    }
    open_.push_back({Store(std::move(empty)), ""});
    return true;
  }
  bool Close() {
    if (skipping_ > 0) {
      --skipping_;
    } else if (!open_.empty()) {
      open_.pop_back();
    }
    return true;
  }
  // The path of the null just stored, cut to `report_steps_` steps.
  void RecordCut() {
    std::string path;
    for (size_t i = 0; i < open_.size() && static_cast<int>(i) < report_steps_; ++i) {
      const Level& l = open_[i];
      path = l.container->is_array() ? IndexPath(path, l.container->size() - 1)
                                     : MemberPath(path, l.key);
    }
    cut_at_->insert(std::move(path));
  }

  const int max_depth_;
  const int report_steps_;
  std::set<std::string>* const cut_at_;
  Json root_;
  std::vector<Level> open_;
  int skipping_ = 0;  // > 0: inside a cut container, this many levels deep
};

}  // namespace

absl::string_view TypeName(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "object";
    case Json::value_t::array:
      return "array";
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "integer";
    case Json::value_t::number_float:
      return "number";
    default:
      return "binary";
  }
}

std::string MemberPath(absl::string_view parent, absl::string_view key) {
  if (!IsPlainKey(key)) return EntryPath(parent, key);
  if (parent.empty()) return std::string(key);
  return absl::StrCat(parent, ".", key);
}

std::string EntryPath(absl::string_view parent, absl::string_view key) {
  return absl::StrCat(parent, "[\"", absl::CHexEscape(key), "\"]");
}

std::string IndexPath(absl::string_view parent, size_t index) {
  return absl::StrCat(parent, "[", index, "]");
}

absl::Status TypeError(absl::string_view path, absl::string_view expected, const Json& got) {
  std::string message = absl::StrCat("expected ", expected, ", got ", TypeName(got));
  if (path.empty()) return absl::InvalidArgumentError(message);
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

absl::StatusOr<Json> Parse(absl::string_view text) {
  if (NestingDepth(text, kMaxDepth) > kMaxDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON nested deeper than ", kMaxDepth, " levels"));
  }
  Json j = Json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat("not valid JSON (", text.size(), " bytes)"));
  }
  return j;
}

absl::StatusOr<Json> ParseCuttingDeep(absl::string_view text, int max_depth, int report_steps,
                                      std::set<std::string>* cut_at) {
  const bool within = NestingDepth(text, max_depth) <= max_depth;
  Json j;
  if (within) {
    j = Json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  } else {
    CuttingBuilder builder(max_depth, report_steps, cut_at);
    if (Json::sax_parse(text.begin(), text.end(), &builder)) {
      j = builder.Take();
    } else {
      j = Json(Json::value_t::discarded);
    }
  }
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat("not valid JSON (", text.size(), " bytes)"));
  }
  return j;
}

absl::Status DecodeString(const Json& j, const std::string& path, std::string* out) {
  if (!j.is_string()) return TypeError(path, "string", j);
  *out = j.get_ref<const std::string&>();
  return absl::OkStatus();
}

absl::Status DecodeInt64(const Json& j, const std::string& path, int64_t* out) {
  if (j.is_number_unsigned()) {
    uint64_t value = *j.get_ptr<const Json::number_unsigned_t*>();
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": integer out of range, ", value,
                                                     " does not fit a 64-bit signed integer"));
    }
    *out = static_cast<int64_t>(value);
    return absl::OkStatus();
  }
  if (!j.is_number_integer()) return TypeError(path, "integer", j);
  *out = *j.get_ptr<const Json::number_integer_t*>();
  return absl::OkStatus();
}

absl::Status DecodeInt32(const Json& j, const std::string& path, int32_t* out) {
  int64_t value = 0;
  if (absl::Status s = DecodeInt64(j, path, &value); !s.ok()) return s;
  if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": integer out of range, ", value,
                                                   " does not fit a 32-bit signed integer"));
  }
  *out = static_cast<int32_t>(value);
  return absl::OkStatus();
}

absl::Status DecodeBool(const Json& j, const std::string& path, bool* out) {
  if (!j.is_boolean()) return TypeError(path, "boolean", j);
  *out = *j.get_ptr<const Json::boolean_t*>();
  return absl::OkStatus();
}

const Json* Find(const Json& obj, absl::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(std::string_view(key.data(), key.size()));
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::Status ExpectObject(const Json& j, absl::string_view path) {
  if (!j.is_object()) return TypeError(path, "object", j);
  return absl::OkStatus();
}

absl::StatusOr<std::string> GetString(const Json& obj, absl::string_view path,
                                      absl::string_view key) {
  absl::StatusOr<std::optional<std::string>> v = GetOptionalString(obj, path, key);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return Missing(path, key);
  return **std::move(v);
}

absl::StatusOr<const Json*> GetObject(const Json& obj, absl::string_view path,
                                      absl::string_view key) {
  absl::StatusOr<const Json*> v = GetOptionalObject(obj, path, key);
  if (v.ok() && *v == nullptr) return Missing(path, key);
  return v;
}

absl::StatusOr<std::optional<std::string>> GetOptionalString(const Json& obj,
                                                             absl::string_view path,
                                                             absl::string_view key) {
  absl::StatusOr<const Json*> m = Member(obj, path, key);
  if (!m.ok()) return m.status();
  if (*m == nullptr) return std::nullopt;
  std::string out;
  if (absl::Status s = DecodeString(**m, MemberPath(path, key), &out); !s.ok()) return s;
  return out;
}

absl::StatusOr<const Json*> GetOptionalObject(const Json& obj, absl::string_view path,
                                              absl::string_view key) {
  absl::StatusOr<const Json*> m = Member(obj, path, key);
  if (!m.ok() || *m == nullptr) return m;
  if (!(*m)->is_object()) return TypeError(MemberPath(path, key), "object", **m);
  return m;
}

absl::StatusOr<const Json*> GetOptionalArray(const Json& obj, absl::string_view path,
                                             absl::string_view key) {
  absl::StatusOr<const Json*> m = Member(obj, path, key);
  if (!m.ok() || *m == nullptr) return m;
  if (!(*m)->is_array()) return TypeError(MemberPath(path, key), "array", **m);
  return m;
}

const Json& MemberOrNull(const Json& obj, absl::string_view key) {
  const Json* v = Find(obj, key);
  return v == nullptr ? Null() : *v;
}

const Json& ArrayOrEmpty(const Json& obj, absl::string_view key) {
  static const Json* const kEmpty = new Json(Json::array());
  const Json* v = Find(obj, key);
  return v != nullptr && v->is_array() ? *v : *kEmpty;
}

std::string StringOr(const Json& obj, absl::string_view key, absl::string_view fallback) {
  const Json* v = Find(obj, key);
  return v != nullptr && v->is_string() ? v->get_ref<const std::string&>() : std::string(fallback);
}

int64_t IntOr(const Json& obj, absl::string_view key, int64_t fallback) {
  const Json* v = Find(obj, key);
  int64_t out = fallback;
  if (v == nullptr || !DecodeInt64(*v, "", &out).ok()) return fallback;
  return out;
}

}  // namespace dra::json_access
