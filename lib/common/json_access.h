#pragma once

// The one way the driver reads JSON that it did not write itself: API server responses, watch
// events, opaque configs, admission requests. Nothing here throws, whatever the input: only
// nlohmann's checked accessors are used after a type test, and parsing uses the non-throwing
// overload behind a nesting limit.
//
// One path syntax, used in every error:
//   member   "spec.driver"; a key that is not a plain identifier (letters, digits, '_', '-') is
//            bracketed and escaped: metadata.labels["a.b/c"]
//   entry    of a JSON map, always bracketed: attributes["index"]
//   index    spec.devices[3]
// One wording: "<field path>: expected <type>, got <type>", the types named by TypeName(). The
// caller prefixes what was being read ("list resourceslices.resource.k8s.io: items[2].metadata:
// expected object, got integer") with dra::Annotate.
//
// Two kinds of readers:
// - checked (Decode*, Get*): a wrong type is an InvalidArgument error naming the path; an absent
//   or null member is "missing" (Get*Optional* return nullopt/nullptr, Get* fail);
// - lenient (*Or, MemberOrNull, ArrayOrEmpty): for best-effort reads such as diagnostics, where a
//   wrong type reads as absent. Never use them where a wrong value would change what is done.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace dra::json_access {

using Json = nlohmann::json;

// Deepest nesting of arrays and objects Parse accepts. Kubernetes objects nest about 20 levels
// (managedFields fieldsV1 a little more); copying, dumping and comparing nlohmann values recurse
// once per level, so an unbounded depth from the network could exhaust a thread's stack.
inline constexpr int kMaxDepth = 512;

// The JSON type as named in error messages: "object", "array", "string", "integer", "number"
// (non-integer), "boolean" or "null".
absl::string_view TypeName(const Json& j);

// Paths (see the file comment). An empty parent gives the bare key ("spec", ["a.b"]).
std::string MemberPath(absl::string_view parent, absl::string_view key);
std::string EntryPath(absl::string_view parent, absl::string_view key);
std::string IndexPath(absl::string_view parent, size_t index);

// InvalidArgument "<path>: expected <expected>, got <type of got>" ("expected ..., got ..." when
// `path` is empty).
absl::Status TypeError(absl::string_view path, absl::string_view expected, const Json& got);

// Parses one JSON document. Errors (InvalidArgument): "not valid JSON (<n> bytes)" or "JSON
// nested deeper than 512 levels". Never throws.
absl::StatusOr<Json> Parse(absl::string_view text);

// Like Parse, for a document that may nest deeper than `max_depth` (the API server stores
// objects nested up to its own limit, about 10,000 levels): every array or object that would sit
// deeper than `max_depth` (the root is at depth 1) is replaced by null, and the path of the value
// that contained it, cut to its first `report_steps` steps ("items[3]", "object"), is added to
// *cut_at. Never recurses, so any depth is safe; a document within `max_depth` is parsed as by
// Parse and leaves *cut_at untouched. Errors (InvalidArgument): "not valid JSON (<n> bytes)".
absl::StatusOr<Json> ParseCuttingDeep(absl::string_view text, int max_depth, int report_steps,
                                      std::set<std::string>* cut_at);

// Decoders of one non-null value at `path`, in the shape ObjectReader-style templates take:
// absl::Status(const Json&, const std::string& path, T* out). *out is untouched on error.
absl::Status DecodeString(const Json& j, const std::string& path, std::string* out);
// A JSON integer that fits int64 (Go's int64). 50.0 and 5e1 are numbers, not integers.
absl::Status DecodeInt64(const Json& j, const std::string& path, int64_t* out);
absl::Status DecodeInt32(const Json& j, const std::string& path, int32_t* out);
absl::Status DecodeBool(const Json& j, const std::string& path, bool* out);

// ---- Checked member reads. `obj` is the value at `path`; it must be an object (else the error
// is "<path>: expected object, got <type>"). An absent or null member is missing.

// The member, or nullptr when `obj` is not an object or the member is absent or null.
const Json* Find(const Json& obj, absl::string_view key);

// "<path>: expected object, got <type>" unless `j` is an object.
absl::Status ExpectObject(const Json& j, absl::string_view path);

// Required members: missing is "<path.key>: required field is missing".
absl::StatusOr<std::string> GetString(const Json& obj, absl::string_view path,
                                      absl::string_view key);
absl::StatusOr<const Json*> GetObject(const Json& obj, absl::string_view path,
                                      absl::string_view key);

// Optional members: missing gives nullopt (or nullptr).
absl::StatusOr<std::optional<std::string>> GetOptionalString(const Json& obj,
                                                             absl::string_view path,
                                                             absl::string_view key);
absl::StatusOr<const Json*> GetOptionalObject(const Json& obj, absl::string_view path,
                                              absl::string_view key);
absl::StatusOr<const Json*> GetOptionalArray(const Json& obj, absl::string_view path,
                                             absl::string_view key);

// ---- Lenient reads (see the file comment): a non-object `obj`, an absent member or one of
// another type reads as the fallback.
const Json& MemberOrNull(const Json& obj, absl::string_view key);
const Json& ArrayOrEmpty(const Json& obj, absl::string_view key);
std::string StringOr(const Json& obj, absl::string_view key, absl::string_view fallback = "");
int64_t IntOr(const Json& obj, absl::string_view key, int64_t fallback = 0);

}  // namespace dra::json_access
