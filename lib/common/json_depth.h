#pragma once

// How deep a JSON text nests, found without parsing it: for callers that must refuse a hostile
// document before nlohmann builds it (copying, dumping and comparing nlohmann values recurse once
// per level, so an unbounded depth from the network could exhaust a thread's stack). Part of the
// json_access library (defined in json_access.cc; json_access::Parse uses it).
//
//   if (json_access::NestingDepth(body, kLimit) > kLimit) return <too deep>;
//
// Thread-safety: a pure function.

#include "absl/strings/string_view.h"

namespace dra::json_access {

// The deepest nesting of arrays and objects in `text` (a bare scalar is 0, "[]" 1), counted
// outside strings in one non-recursive pass over the bytes; stops once past `limit` and returns a
// value above it. Exact for valid JSON and for every valid prefix of invalid JSON (all that a
// parser builds before it fails), so a caller that refuses text above its limit never has a
// parser build a deeper value.
int NestingDepth(absl::string_view text, int limit);

}  // namespace dra::json_access
