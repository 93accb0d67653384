#pragma once

// Finds duplicated object keys in JSON text without building a document: nlohmann::json keeps the
// last of two equal keys silently, while Kubernetes' strict decoding rejects them. The webhook
// parses a review with nlohmann's plain (fast) parser and runs this scan beside it, instead of a
// callback parser that tracks keys in sets (about a third of the cost of a review).
//
// Thread-safety: a pure function.

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace dra::webhook {

// The path of the first duplicated key in document order, written as lib/api writes field paths
// ("request.object.spec.devices.config[0].opaque.parameters.kind", keys that are not plain
// identifiers as ["key"]), or nullopt when there is none. Keys are compared after JSON unescaping.
// Text that is not valid JSON gives an unspecified result (the real parser reports it).
std::optional<std::string> FindDuplicateKey(absl::string_view json);

}  // namespace dra::webhook
