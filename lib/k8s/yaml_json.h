#pragma once

// YAML manifests to the JSON the API server takes, converted as kubectl converts them.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace dra::k8s {

struct YamlToJsonOptions {
  // Leave out the members of maps whose value is null (a template's optional fields).
  bool drop_null_members = false;
};

// YAML (block or flow) to JSON with the YAML 1.2 core schema's typing of plain scalars: null and
// ~ become null, true and false booleans, decimal integers (an optional sign, at most 19 digits)
// numbers; every other scalar, and every quoted or tagged one, a string. InvalidArgument with the
// parser's position for malformed YAML.
absl::StatusOr<nlohmann::json> YamlToJson(absl::string_view yaml, YamlToJsonOptions options = {});

// Every document of a multi-document YAML text ("---" between them), converted as above; empty
// documents are left out.
absl::StatusOr<std::vector<nlohmann::json>> YamlDocumentsToJson(absl::string_view yaml,
                                                                YamlToJsonOptions options = {});

}  // namespace dra::k8s
