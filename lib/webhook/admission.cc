#include "lib/webhook/admission.h"

#include <array>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "lib/api/config.h"
#include "lib/api/gpu_kinds.h"
#include "lib/common/json_depth.h"
#include "lib/webhook/duplicate_keys.h"
#include "lib/webhook/review_scan.h"
#include "nlohmann/json.hpp"

namespace dra::webhook {
namespace {

using nlohmann::json;

constexpr absl::string_view kReviewApiVersion = "admission.k8s.io/v1";
constexpr absl::string_view kReviewKind = "AdmissionReview";
constexpr absl::string_view kResourceGroup = "resource.k8s.io";
// Where request.object lives in the review; the duplicate-key finder reports paths from the root.
constexpr absl::string_view kObjectPathPrefix = "request.object.";

// Appends `s` as a JSON string literal (quotes included).
void AppendJsonString(std::string& out, absl::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 0xf]);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

// The member `key` of object `j` if it is a string, else "".
absl::string_view StringMember(const json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return {};
  const std::string& s = it->get_ref<const std::string&>();
  return absl::string_view(s.data(), s.size());
}

// The member `key` of object `j`, or nullptr when absent or null.
const json* Member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

AdmissionResult PlainError(int code, std::string message) {
  AdmissionResult r;
  r.http_code = code;
  r.content_type = "text/plain; charset=utf-8";
  r.outcome = ReviewOutcome::kBadRequest;
  r.body = message + "\n";
  r.message = std::move(message);
  return r;
}

AdmissionResult Respond(absl::string_view uid, bool allowed, absl::string_view reason,
                        std::string message) {
  AdmissionResult r;
  r.outcome = allowed ? ReviewOutcome::kAllowed : ReviewOutcome::kDenied;
  r.body.reserve(160 + message.size() + uid.size());
  r.body += R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":)";
  AppendJsonString(r.body, uid);
  if (allowed) {
    r.body += R"(,"allowed":true}})";
  } else {
    r.body += R"(,"allowed":false,"status":{"metadata":{},"status":"Failure","message":)";
    AppendJsonString(r.body, message);
    r.body += R"(,"reason":)";
    AppendJsonString(r.body, reason);
    r.body += "}}}";
  }
  r.message = std::move(message);
  return r;
}

// True when `s` starts with a field path as lib/api writes them (identifiers joined by '.',
// bracketed quoted keys, [n] indexes) followed by ": "; sets *path_len to the path's length.
bool StartsWithFieldPath(absl::string_view s, size_t* path_len) {
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == ':') break;
    if (c == '[') {
      // [123] or ["escaped key"]
      ++i;
      if (i < s.size() && s[i] == '"') {
        ++i;
        while (i < s.size() && s[i] != '"') i += (s[i] == '\\') ? 2 : 1;
        if (i >= s.size()) return false;
        ++i;  // closing quote
      } else {
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
      }
      if (i >= s.size() || s[i] != ']') return false;
      ++i;
      continue;
    }
    bool ident = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-' || c == '.';
    if (!ident) return false;
    ++i;
  }
  if (i == 0 || i + 1 >= s.size() || s[i] != ':' || s[i + 1] != ' ') return false;
  *path_len = i;
  return true;
}

// "<prefix>.<path>: <msg>" when lib/api's message starts with a field path, else
// "<prefix>: <message>" (errors about the parameters object as a whole).
std::string JoinPath(absl::string_view prefix, absl::string_view message) {
  size_t path_len = 0;
  if (StartsWithFieldPath(message, &path_len)) {
    absl::string_view sep = message[0] == '[' ? "" : ".";
    return absl::StrCat(prefix, sep, message);
  }
  return absl::StrCat(prefix, ": ", message);
}

bool SupportedVersion(absl::string_view v) { return v == "v1" || v == "v1beta1" || v == "v1beta2"; }

// Validates the configs of one object. Returns the error messages, or a BadRequest message in
// *malformed when the object does not have the shape of its resource.
std::vector<std::string> ValidateConfigs(const json& object, bool is_template,
                                         const std::optional<std::string>& duplicate,
                                         const FeatureGates& gates, std::string* malformed) {
  std::vector<std::string> errors;
  static constexpr const char* kClaimSteps[] = {"spec", "devices", "config"};
  static constexpr const char* kTemplateSteps[] = {"spec", "spec", "devices", "config"};
  std::span<const char* const> steps = is_template ? std::span<const char* const>(kTemplateSteps)
                                                   : std::span<const char* const>(kClaimSteps);
  const json* node = &object;
  std::string path;
  for (const char* step : steps) {
    if (!node->is_object()) {
      *malformed = absl::StrCat(path.empty() ? "object" : path, ": expected an object, got ",
                                node->type_name());
      return errors;
    }
    node = Member(*node, step);
    if (node == nullptr) return errors;  // nothing configured
    if (!path.empty()) path += '.';
    path += step;
  }
  if (!node->is_array()) {
    *malformed = absl::StrCat(path, ": expected an array, got ", node->type_name());
    return errors;
  }
  for (size_t i = 0; i < node->size(); ++i) {
    const json& entry = (*node)[i];
    const json* opaque = Member(entry, "opaque");
    if (opaque == nullptr || StringMember(*opaque, "driver") != kDriverName) continue;
    std::string params_path = absl::StrCat(path, "[", i, "].opaque.parameters");
    if (duplicate.has_value()) {
      // The scan's path is rooted at the review: request.object.<params_path>...
      absl::string_view d = *duplicate;
      if (absl::ConsumePrefix(&d, kObjectPathPrefix) && absl::ConsumePrefix(&d, params_path) &&
          (d.empty() || d[0] == '.' || d[0] == '[')) {
        errors.push_back(absl::StrCat(params_path, d, ": duplicate field"));
        continue;
      }
    }
    const json* params = Member(*opaque, "parameters");
    if (params == nullptr) {
      errors.push_back(absl::StrCat(params_path, ": required for driver ", kDriverName));
      continue;
    }
    absl::StatusOr<api::Config> config = api::DecodeOpaqueConfig(*params, gates);
    if (!config.ok()) {
      errors.push_back(JoinPath(params_path, config.status().message()));
      continue;
    }
    // A valid config of a kind the GPU plugin never applies would be refused at prepare or
    // silently ignored: refuse it here (docs/webhook.md).
    if (absl::Status kind = api::CheckGpuConfigKind(*config); !kind.ok()) {
      errors.push_back(JoinPath(params_path, kind.message()));
    }
  }
  return errors;
}

}  // namespace

absl::string_view ReviewOutcomeName(ReviewOutcome outcome) {
  switch (outcome) {
    case ReviewOutcome::kAllowed:
      return "allowed";
    case ReviewOutcome::kDenied:
      return "denied";
    case ReviewOutcome::kBadRequest:
      return "bad_request";
  }
  return "unknown";
}

namespace {

// What the review says, taken from the document or from the scan.
struct ReviewFields {
  std::string uid;
  std::string operation;
  bool has_object = false;  // request.object present and not null
  std::string group, version, resource;
};

// The answer once the envelope has been checked: the part both ways of reading a review share.
// `object` is request.object (or, from the scan, a document holding the members on the way to
// the configs).
AdmissionResult Decide(const ReviewFields& f, const json& object,
                       const std::optional<std::string>& duplicate, const FeatureGates& gates) {
  if (f.operation == "DELETE" || !f.has_object) return Respond(f.uid, true, "", "");
  bool is_claim = f.resource == "resourceclaims";
  bool is_template = f.resource == "resourceclaimtemplates";
  if (f.group != kResourceGroup || !SupportedVersion(f.version) || !(is_claim || is_template)) {
    // The GroupVersionResource as Go prints it: "group/version, Resource=resource".
    return Respond(f.uid, false, "BadRequest",
                   absl::StrCat("expected resource to be one of the supported versions for "
                                "resourceclaims or resourceclaimtemplates, got ",
                                f.group, "/", f.version, ", Resource=", f.resource));
  }
  std::string malformed;
  std::vector<std::string> errors =
      ValidateConfigs(object, is_template, duplicate, gates, &malformed);
  if (!malformed.empty()) {
    return Respond(f.uid, false, "BadRequest",
                   absl::StrCat("could not decode the ", f.resource, " object: ", malformed));
  }
  if (errors.empty()) return Respond(f.uid, true, "", "");
  return Respond(
      f.uid, false, "Invalid",
      absl::StrCat(errors.size(), " configs failed to validate: ", absl::StrJoin(errors, "; ")));
}

json ParseSpan(absl::string_view text) {
  return json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

// The fast way (review_scan.h): the answer from the scan and a parse of the configs alone, or
// nullopt when the review needs the whole document (not JSON the scan vouches for, which
// includes any duplicate key, or any answer other than a review response).
std::optional<AdmissionResult> HandleScanned(absl::string_view body, const FeatureGates& gates) {
  const std::optional<std::string> duplicate;  // the scan gives up on any
  std::optional<ReviewScan> s = ScanReview(body);
  if (!s.has_value() || s->root.front() != '{' || s->request.empty() || s->request.front() != '{' ||
      JsonStringValue(s->api_version) != kReviewApiVersion ||
      JsonStringValue(s->kind) != kReviewKind) {
    return std::nullopt;
  }
  ReviewFields f;
  f.uid = JsonStringValue(s->uid);
  f.operation = JsonStringValue(s->operation);
  f.has_object = !s->object.empty() && s->object != "null";
  f.group = JsonStringValue(s->group);
  f.version = JsonStringValue(s->version);
  f.resource = JsonStringValue(s->resource_name);
  if (!f.has_object) return Decide(f, json(), duplicate, gates);
  // The object as far as ValidateConfigs walks it: spec, devices (spec, spec, devices for
  // templates), then config parsed whole. A member that is not an object where an object is
  // expected is parsed whole too, so that the error names its type as before.
  bool is_template = f.resource == "resourceclaimtemplates";
  const std::array<absl::string_view, 4> chain =
      is_template ? std::array<absl::string_view, 4>{s->object, s->spec, s->template_spec,
                                                     s->template_devices}
                  : std::array<absl::string_view, 4>{s->object, s->spec, s->devices, {}};
  static constexpr const char* kClaimNames[] = {"", "spec", "devices", "config"};
  static constexpr const char* kTemplateNames[] = {"", "spec", "spec", "devices", "config"};
  absl::string_view last = is_template ? s->template_config : s->config;
  const char* const* names = is_template ? kTemplateNames : kClaimNames;
  size_t levels = is_template ? 5 : 4;
  json object = json::object();
  json* node = &object;
  for (size_t i = 0; i < levels; ++i) {
    absl::string_view text = i + 1 == levels ? last : chain[i];
    if (text.empty() || text == "null") break;  // absent: nothing configured
    bool container = i + 1 < levels && text.front() == '{';
    if (i == 0) {
      if (container) continue;
      object = ParseSpan(text);  // not an object: ValidateConfigs names its type
      break;
    }
    if (container) {
      node = &((*node)[names[i]] = json::object());
      continue;
    }
    (*node)[names[i]] = ParseSpan(text);
    break;
  }
  return Decide(f, object, duplicate, gates);
}

}  // namespace

AdmissionResult HandleAdmissionReview(absl::string_view content_type, absl::string_view body,
                                      const FeatureGates& gates) {
  if (content_type != "application/json") {
    return PlainError(415,
                      absl::StrCat("contentType=", content_type, ", expected application/json"));
  }
  if (std::optional<AdmissionResult> r = HandleScanned(body, gates)) return *r;
  return HandleAdmissionReviewWhole("application/json", body, gates);
}

AdmissionResult HandleAdmissionReviewWhole(absl::string_view content_type, absl::string_view body,
                                           const FeatureGates& gates) {
  if (content_type != "application/json") {
    return PlainError(415,
                      absl::StrCat("contentType=", content_type, ", expected application/json"));
  }
  // Before any parse: nlohmann builds a document of any depth without recursing, but copies,
  // dumps and comparisons of it would recurse once per level, and the scan recurses up to its own
  // limit. No review the API server sends is deeper.
  if (json_access::NestingDepth(body, kMaxReviewDepth) > kMaxReviewDepth) {
    return PlainError(400, absl::StrCat("could not decode the request body as an AdmissionReview: "
                                        "JSON nested deeper than ",
                                        kMaxReviewDepth, " levels (request.object may nest ",
                                        kMaxObjectDepth, ", the most the API server decodes)"));
  }
  json review = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (review.is_discarded()) {
    // Only now pay for a parse that says what is wrong.
    absl::StatusOr<json> parsed = api::ParseJsonStrict(body);
    return PlainError(400, absl::StrCat("could not decode the request body as an AdmissionReview: ",
                                        parsed.ok() ? "invalid JSON" : parsed.status().message()));
  }
  // Duplicate keys, which the parser resolves silently, are found by a scan of the text. A
  // duplicate inside a config's parameters is that config's error.
  std::optional<std::string> duplicate = FindDuplicateKey(body);
  if (!review.is_object()) {
    return PlainError(400, absl::StrCat("request body: expected an admission.k8s.io/v1 "
                                        "AdmissionReview object, got ",
                                        review.type_name()));
  }
  absl::string_view api_version = StringMember(review, "apiVersion");
  absl::string_view kind = StringMember(review, "kind");
  if (api_version != kReviewApiVersion || kind != kReviewKind) {
    return PlainError(400, absl::StrCat("request body: expected apiVersion ", kReviewApiVersion,
                                        " and kind ", kReviewKind, ", got apiVersion \"",
                                        api_version, "\" and kind \"", kind, "\""));
  }
  const json* request = Member(review, "request");
  if (request == nullptr) return PlainError(400, "AdmissionReview has no request");
  if (!request->is_object()) {
    return PlainError(400, absl::StrCat("AdmissionReview request: expected an object, got ",
                                        request->type_name()));
  }
  ReviewFields f;
  f.uid = std::string(StringMember(*request, "uid"));
  f.operation = std::string(StringMember(*request, "operation"));
  const json* object = Member(*request, "object");
  f.has_object = object != nullptr;
  if (const json* resource = Member(*request, "resource"); resource != nullptr) {
    f.group = std::string(StringMember(*resource, "group"));
    f.version = std::string(StringMember(*resource, "version"));
    f.resource = std::string(StringMember(*resource, "resource"));
  }
  // By reference: a copy of the object would recurse once per level of its nesting.
  static const json* const kNull = new json();
  return Decide(f, object != nullptr ? *object : *kNull, duplicate, gates);
}

}  // namespace dra::webhook
