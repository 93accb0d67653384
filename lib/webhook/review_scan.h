#pragma once

// One validating pass over the text of an AdmissionReview that finds the few members the webhook
// reads, without building a document. Building nlohmann's document of a whole review
// (managedFields, userInfo, annotations: about 2.4 KiB for a `kubectl apply`'d claim) was about 70%
// of the server's CPU per review (docs/webhook.md "Webhook profile"); the webhook only needs a
// dozen scalars and the small `config` array, which it then parses alone.
//
//   std::optional<ReviewScan> s = ScanReview(body);
//   if (!s) { ...parse the whole text (invalid JSON, or JSON the scan leaves to the parser)... }
//   s->uid  // the raw JSON text of request.uid, e.g. "\"0b1c...\"", or empty when absent
//
// The scan is at most as permissive as nlohmann's parser: text it returns a value for is valid
// JSON that nlohmann::json::parse accepts, without a repeated key in any object. It gives up
// (nullopt) on invalid JSON, on a repeated key, and on valid JSON it does not decide itself: \u
// escapes, keys with any escape, objects of more than 64 members, numbers with an exponent or
// more than 300 integer digits (nlohmann refuses those that overflow a double), nesting deeper
// than 256, a byte-order mark. The caller then parses the whole text and looks for the duplicate
// (FindDuplicateKey), as it did before the scan existed.
//
// Members are looked up only through objects (never inside arrays), as the webhook's own lookups
// do.
//
// Thread-safety: a pure function.

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace dra::webhook {

// The raw JSON text of each member (a view into the scanned text, from the value's first byte to
// its last), or an empty view when the member is absent or its parent is not an object.
struct ReviewScan {
  absl::string_view root;           // the whole document's value
  absl::string_view api_version;    // apiVersion
  absl::string_view kind;           // kind
  absl::string_view request;        // request
  absl::string_view uid;            // request.uid
  absl::string_view operation;      // request.operation
  absl::string_view resource;       // request.resource
  absl::string_view group;          // request.resource.group
  absl::string_view version;        // request.resource.version
  absl::string_view resource_name;  // request.resource.resource
  absl::string_view object;         // request.object
  // ResourceClaim: request.object.spec.devices.config
  absl::string_view spec;     // request.object.spec
  absl::string_view devices;  // request.object.spec.devices
  absl::string_view config;   // request.object.spec.devices.config
  // ResourceClaimTemplate: request.object.spec.spec.devices.config
  absl::string_view template_spec;     // request.object.spec.spec
  absl::string_view template_devices;  // request.object.spec.spec.devices
  absl::string_view template_config;   // request.object.spec.spec.devices.config
};

// See the file comment.
std::optional<ReviewScan> ScanReview(absl::string_view json);

// The value of a JSON string's raw text (quotes included, as ScanReview returns it); "" when
// `raw` is empty or not a string. Simple escapes (\" \\ \/ \b \f \n \r \t) are decoded; ScanReview
// never returns text with \u escapes.
std::string JsonStringValue(absl::string_view raw);

}  // namespace dra::webhook
