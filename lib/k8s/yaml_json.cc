#include "lib/k8s/yaml_json.h"

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace dra::k8s {
namespace {

std::optional<int64_t> ParseInteger(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  const size_t first = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (first == s.size()) return std::nullopt;
  for (size_t i = first; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
  }
  return std::strtoll(s.c_str(), nullptr, 10);
}

nlohmann::json Convert(const YAML::Node& node, const YamlToJsonOptions& o) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      if (node.Tag() != "?") return s;  // quoted (tag "!") or explicitly tagged: a string
      if (s == "true") return true;
      if (s == "false") return false;
      if (s == "null" || s == "~") return nullptr;
      if (std::optional<int64_t> n = ParseInteger(s)) return *n;
      return s;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const YAML::Node& item : node) out.push_back(Convert(item, o));
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : node) {
        nlohmann::json value = Convert(kv.second, o);
        if (!(o.drop_null_members && value.is_null())) out[kv.first.Scalar()] = std::move(value);
      }
      return out;
    }
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<nlohmann::json> YamlToJson(absl::string_view yaml, YamlToJsonOptions options) {
  try {
    return Convert(YAML::Load(std::string(yaml)), options);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("parse YAML: ", e.what()));
  }
}

absl::StatusOr<std::vector<nlohmann::json>> YamlDocumentsToJson(absl::string_view yaml,
                                                                YamlToJsonOptions options) {
  std::vector<nlohmann::json> out;
  try {
    for (const YAML::Node& doc : YAML::LoadAll(std::string(yaml))) {
      if (doc.IsNull()) continue;
      out.push_back(Convert(doc, options));
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("parse YAML: ", e.what()));
  }
  return out;
}

}  // namespace dra::k8s
