#pragma once

// A Kubernetes REST client over JSON: CRUD, status updates, merge patch, server-side apply and
// watch for any kind described by a ResourceInfo. Typed access sits on top (typed_client.h).
//
// Every call passes a client-side rate limiter (QPS with burst, like client-go) and retries a 429
// TooManyRequests, a 5xx carrying Retry-After, and a 5xx to a read, up to `max_retries` times with
// exponential backoff, never sooner than the server's Retry-After (ClientOptions).
//
// Thread-safety: all methods may be called concurrently from any thread.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/common/backoff.h"
#include "lib/k8s/http.h"
#include "lib/k8s/object_meta.h"
#include "lib/k8s/resource_info.h"
#include "lib/k8s/rest_config.h"
#include "nlohmann/json.hpp"

namespace dra::k8s {

// Caps on what the API server may send, so that a broken or hostile server costs an error, not the
// process's memory. The driver lists in pages of 500; its objects (ResourceSlices of up to 128
// devices, ResourceClaims, Pods) are a few KiB to about 100 KiB, and etcd refuses objects over
// 1.5 MiB by default, so a page stays far below 64 MiB. A watch line carries one object, hence
// the smaller cap, still ten times etcd's default object limit.
inline constexpr size_t kMaxResponseBodyBytes = size_t{64} << 20;
inline constexpr size_t kMaxWatchLineBytes = size_t{16} << 20;
// Three times the API server's bookmark period (about a minute), so one late bookmark does not
// end a healthy watch; client-go notices a dead connection in under a minute through HTTP/2
// pings, which this HTTP/1.1 client does not have.
inline constexpr absl::Duration kWatchIdleTimeout = absl::Minutes(3);

struct ClientOptions {
  double qps = 50;  // sustained requests per second; <= 0 disables the limiter
  int burst = 100;
  // Answers retried: 429, a 5xx with Retry-After, and any 5xx to a GET; each waits the next
  // backoff step or the server's Retry-After (capped at 10 s), whichever is longer. The defaults
  // ride out about 12 s of an overloaded or restarting API server before the error is returned.
  int max_retries = 6;
  BackoffOptions retry_backoff = {
      .initial = absl::Milliseconds(200), .max = absl::Seconds(5), .factor = 2.0, .jitter = 0.2};
  absl::Duration request_timeout = absl::Seconds(30);
  std::string field_manager = "dra-driver-nvidia-gpu";
  // A larger response body fails the request (ResourceExhausted, naming the limit and the URL).
  size_t max_body_bytes = kMaxResponseBodyBytes;
  // A longer watch event line ends the watch (ResourceExhausted, naming the limit and the URL).
  size_t max_watch_line_bytes = kMaxWatchLineBytes;
  // A watch that receives nothing (no event, no bookmark, no byte) for this long is presumed to
  // sit on a dead connection: it ends with DeadlineExceeded (IsIdleTimeout) and the caller
  // re-watches from its last resourceVersion. The API server sends a bookmark about once a
  // minute to watches that allow them, so a healthy watch is never this quiet.
  absl::Duration watch_idle_timeout = kWatchIdleTimeout;
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;  // page size; 0: server default (everything)
  std::string continue_token;
  std::string resource_version;  // "" most recent; "0" any (cache)
};

struct DeleteOptions {
  std::string uid;                 // precondition: only delete this incarnation
  std::string resource_version;    // precondition: only delete this version
  std::string propagation_policy;  // "Background" | "Foreground" | "Orphan"
  std::optional<int64_t> grace_period_seconds;
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // resume point; "" starts with synthetic ADDED events
  bool allow_bookmarks = true;
  int64_t timeout_seconds = 300;  // the server ends the watch after this; the caller re-watches
};

// An object the API server holds that the client cannot read whole: nested deeper than
// json_access::kMaxDepth (512), which the API server accepts (up to its own limit, about 10,000
// levels), e.g. in a claim's opaque driver parameters. Lists and watches deliver its identity
// instead of failing, so that one such object never stalls them (docs/architecture.md, "No object
// stalls a component").
struct UndecodableObject {
  std::string namespace_name;
  std::string name;
  std::string uid;
  std::string resource_version;
  std::string reason;  // "nested deeper than 512 levels"
};

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark };
  Type type;
  nlohmann::json object;
  // Set when the object cannot be read whole: `object` then holds only its identity
  // ({"metadata": {namespace, name, uid, resourceVersion}}) and must not be decoded as its kind.
  std::optional<UndecodableObject> undecodable;
};

struct ListPage;  // wire_decode.h

class Client {
 public:
  static absl::StatusOr<std::unique_ptr<Client>> Create(RestConfig config,
                                                        ClientOptions options = {});

  // `ns` is ignored for cluster-scoped kinds. `subresource` e.g. "status".
  absl::StatusOr<nlohmann::json> Get(const ResourceInfo& r, absl::string_view ns,
                                     absl::string_view name);
  // One page. The returned list's metadata.continue is set when more pages exist. Objects that
  // cannot be read whole (UndecodableObject) are left out of "items", logged and counted
  // (ReportUndecodable); ListPageOf returns them.
  absl::StatusOr<nlohmann::json> List(const ResourceInfo& r, absl::string_view ns,
                                      const ListOptions& options = {});
  // All pages (following continue tokens); returns {"items":[...], "metadata":{resourceVersion}},
  // leaving out objects that cannot be read whole as List does; ListAllOf returns them.
  absl::StatusOr<nlohmann::json> ListAll(const ResourceInfo& r, absl::string_view ns,
                                         ListOptions options = {});
  // List and ListAll, typed (include lib/k8s/wire_decode.h): objects that cannot be read whole
  // are in ListPage::undecodable, not in `items`. ListAllOf's continue_token is empty.
  absl::StatusOr<ListPage> ListPageOf(const ResourceInfo& r, absl::string_view ns,
                                      const ListOptions& options = {});
  absl::StatusOr<ListPage> ListAllOf(const ResourceInfo& r, absl::string_view ns,
                                     ListOptions options = {});
  absl::StatusOr<nlohmann::json> Create(const ResourceInfo& r, absl::string_view ns,
                                        const nlohmann::json& object);
  // PUT; the object's metadata.resourceVersion (if set) is the optimistic-concurrency precondition.
  absl::StatusOr<nlohmann::json> Update(const ResourceInfo& r, absl::string_view ns,
                                        const nlohmann::json& object,
                                        absl::string_view subresource = "");
  absl::StatusOr<nlohmann::json> UpdateStatus(const ResourceInfo& r, absl::string_view ns,
                                              const nlohmann::json& object) {
    return Update(r, ns, object, "status");
  }
  absl::Status Delete(const ResourceInfo& r, absl::string_view ns, absl::string_view name,
                      const DeleteOptions& options = {});
  // RFC 7386 JSON merge patch.
  absl::StatusOr<nlohmann::json> MergePatch(const ResourceInfo& r, absl::string_view ns,
                                            absl::string_view name, const nlohmann::json& patch,
                                            absl::string_view subresource = "");
  // Server-side apply of `object` (must carry apiVersion, kind, metadata.name), as
  // `field_manager` (empty: ClientOptions::field_manager).
  absl::StatusOr<nlohmann::json> Apply(const ResourceInfo& r, absl::string_view ns,
                                       const nlohmann::json& object, bool force = true,
                                       absl::string_view subresource = "",
                                       absl::string_view field_manager = "");

  // Streams watch events until the server ends the watch (returns OK), `on_event` returns false
  // (OK), `stopped` returns true (OK), the resourceVersion is too old (IsGone), the connection
  // fails (Unavailable), or nothing arrives for ClientOptions::watch_idle_timeout
  // (DeadlineExceeded, IsIdleTimeout; logged as a warning). Bookmarks are delivered so the caller
  // can advance its resume point.
  absl::Status Watch(const ResourceInfo& r, absl::string_view ns, const WatchOptions& options,
                     const std::function<bool(WatchEvent&&)>& on_event,
                     const std::function<bool()>& stopped = {});

  // Raw GET of an API path ("/readyz"), for health checks and discovery.
  absl::StatusOr<std::string> GetRaw(absl::string_view path);

  const RestConfig& config() const { return transport_->config(); }

 private:
  Client(std::unique_ptr<HttpTransport> transport, ClientOptions options);
  // Rate-limits, sends, retries 429/Retry-After, and maps non-2xx answers to errors.
  absl::StatusOr<nlohmann::json> Call(HttpRequest request, absl::string_view what);
  // Call, returning the 2xx answer's body unparsed.
  absl::StatusOr<std::string> CallBody(HttpRequest request, absl::string_view what);
  void WaitForToken();

  std::unique_ptr<HttpTransport> transport_;
  const ClientOptions options_;

  absl::Mutex limiter_mu_;
  double tokens_ ABSL_GUARDED_BY(limiter_mu_);
  absl::Time last_refill_ ABSL_GUARDED_BY(limiter_mu_);
};

// The URL path of a collection or object: "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims".
std::string ResourcePath(const ResourceInfo& r, absl::string_view ns, absl::string_view name = "",
                         absl::string_view subresource = "");

// Runs `fn` until it returns something other than a Conflict error, at most `attempts` times,
// with a short jittered pause between tries (as client-go's RetryOnConflict).
absl::Status RetryOnConflict(const std::function<absl::Status()>& fn, int attempts = 5);

}  // namespace dra::k8s
