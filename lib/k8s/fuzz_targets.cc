#include "lib/k8s/fuzz_targets.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "lib/common/json_access.h"
#include "lib/k8s/http_parse.h"
#include "lib/k8s/objects_apps.h"
#include "lib/k8s/objects_compute_domain.h"
#include "lib/k8s/objects_coordination.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/objects_resource.h"
#include "lib/k8s/rest_config.h"
#include "lib/k8s/wire_decode.h"

namespace dra::k8s::fuzz {
namespace {

// Small enough that the corpus reaches it; the client's default is 16 MiB.
constexpr size_t kFuzzMaxLineBytes = size_t{64} * 1024;

[[noreturn]] void Violation(const char* what) {
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
  std::abort();
}

// Decodes one object as each kind we read; a decoded object must encode and decode again.
void DecodeObject(const nlohmann::json& j) {
  if (absl::StatusOr<ResourceClaim> c = ResourceClaim::FromJson(j); c.ok()) {
    if (!ResourceClaim::FromJson(c->ToJson()).ok()) Violation("ResourceClaim round trip");
  }
  if (absl::StatusOr<ResourceSlice> s = ResourceSlice::FromJson(j); s.ok()) {
    if (!ResourceSlice::FromJson(s->ToJson()).ok()) Violation("ResourceSlice round trip");
  }
}

// A decoded T must encode, decode again, and encode to the same JSON (nothing the decoder accepts
// is lost or changed by one more round).
template <typename T>
void RoundTrip(const nlohmann::json& j, const char* kind) {
  absl::StatusOr<T> first = T::FromJson(j);
  if (!first.ok()) return;
  const nlohmann::json encoded = first->ToJson();
  absl::StatusOr<T> second = T::FromJson(encoded);
  if (!second.ok()) {
    std::fprintf(stderr, "%s: %s\n", kind, std::string(second.status().message()).c_str());
    Violation("typed object does not decode its own encoding");
  }
  if (second->ToJson() != encoded) {
    std::fprintf(stderr, "%s: %s\n", kind, encoded.dump().c_str());
    Violation("typed object encodes differently after a round trip");
  }
}

}  // namespace

void HttpResponse(const uint8_t* data, size_t size) {
  if (size == 0) return;
  // The first byte picks the piece size (1..256), so splits at every position get exercised.
  const size_t piece = static_cast<size_t>(data[0]) + 1;
  absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  ResponseParser parser(/*head_request=*/(data[0] & 1) != 0);
  uint64_t body = 0;
  absl::Status s;
  while (s.ok() && !rest.empty() && !parser.done() && !parser.aborted()) {
    absl::string_view chunk = rest.substr(0, piece);
    rest.remove_prefix(chunk.size());
    s = parser.Feed(chunk, [&](absl::string_view b) {
      body += b.size();
      return true;
    });
  }
  if (s.ok() && !parser.done()) s = parser.Finish();
  if (body > size) Violation("more body bytes than input bytes");
  if (parser.head().headers.size() > size) Violation("more headers than input bytes");
  if (s.ok() && parser.head_done() && (parser.head().code < 100 || parser.head().code > 999)) {
    Violation("status code out of range");
  }
}

void WatchStream(const uint8_t* data, size_t size) {
  WatchLineSplitter splitter(kFuzzMaxLineBytes);
  absl::StatusOr<bool> r = splitter.Feed(
      absl::string_view(reinterpret_cast<const char*>(data), size), [](absl::string_view line) {
        if (line.size() > kFuzzMaxLineBytes) Violation("line over the cap");
        WatchLineError error = WatchLineError::kEvent;
        absl::StatusOr<WatchLine> w = ParseWatchLine(line, "watch fuzz", &error);
        if (!w.ok()) return true;
        if (w->event.has_value() == !w->server_error.ok()) Violation("event xor error");
        if (w->event.has_value()) {
          if (!w->event->object.is_object()) Violation("event object is not an object");
          DecodeObject(w->event->object);
        }
        return true;
      });
  if (r.ok() && !*r) Violation("splitter stopped without being asked");
}

void Objects(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<nlohmann::json> j = json_access::Parse(text);
  if (j.ok()) DecodeObject(*j);
  // As the client reads a list page (a second parse only where the first refused the nesting):
  // an item nested too deep is set apart, never a failure.
  absl::StatusOr<ListPage> page = j.ok() ? DecodeListPage(*std::move(j)) : ParseListPage(text);
  if (!page.ok()) return;
  for (const nlohmann::json& item : page->items) {
    if (!item.is_object()) Violation("list item is not an object");
    DecodeObject(item);
  }
}

void TypedObjects(const uint8_t* data, size_t size) {
  absl::StatusOr<nlohmann::json> j =
      json_access::Parse(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!j.ok()) return;
  RoundTrip<ComputeDomain>(*j, "ComputeDomain");
  RoundTrip<ComputeDomainClique>(*j, "ComputeDomainClique");
  RoundTrip<Pod>(*j, "Pod");
  RoundTrip<Node>(*j, "Node");
  RoundTrip<DaemonSet>(*j, "DaemonSet");
  RoundTrip<Lease>(*j, "Lease");
  RoundTrip<ResourceClaimTemplate>(*j, "ResourceClaimTemplate");
  RoundTrip<DeviceClass>(*j, "DeviceClass");
  RoundTrip<Event>(*j, "Event");
}

void Kubeconfig(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto read = [](const std::string& path) -> absl::StatusOr<std::string> {
    if (path.find("missing") != std::string::npos) return absl::NotFoundError(path);
    return std::string("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
  };
  for (const char* context : {"", "other"}) {
    absl::StatusOr<RestConfig> cfg = ParseKubeconfig(text, "/fuzz/kubeconfig", context, read);
    if (!cfg.ok()) {
      if (cfg.status().message().find("/fuzz/kubeconfig") == absl::string_view::npos) {
        Violation("kubeconfig error does not name the file");
      }
      continue;
    }
    if (cfg->server.rfind("https://", 0) != 0 && cfg->server.rfind("http://", 0) != 0) {
      Violation("kubeconfig accepted a server that is not an http(s) URL");
    }
    if (cfg->client_cert_pem.empty() != cfg->client_key_pem.empty()) {
      Violation("kubeconfig accepted a client certificate without its key");
    }
  }
}

}  // namespace dra::k8s::fuzz
