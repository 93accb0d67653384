#pragma once

// HTTP/1.1 transport to the API server, over TLS (OpenSSL) or plain TCP (http:// servers, used by
// unit tests). Knows TLS and authentication, nothing about Kubernetes objects. Our own small
// client instead of libcurl: the kubelet plugin's memory budget could not afford the ~30 shared
// libraries Debian's libcurl maps (docs/design-notes.md).
//
// Thread-safety: Do() and Stream() may be called concurrently from any thread; each call borrows
// a keep-alive connection from a small pool (exclusively, until the response is read) or opens a
// new one. A pooled connection the server closed while idle is replaced transparently: the
// request is retried once on a fresh connection when it is idempotent, or when nothing of it was
// sent yet.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/k8s/rest_config.h"
#include "lib/k8s/tls_connection.h"

namespace dra::k8s {

struct HttpRequest {
  std::string method = "GET";
  std::string path_and_query;  // "/api/v1/nodes?limit=10", appended to the server URL
  std::string content_type;    // request body type; empty when there is no body
  std::string body;
  absl::Duration timeout = absl::Seconds(30);  // whole-request limit; streams use none
  // The longest wait for the next byte from the server (the response head or body): past it the
  // request fails with DeadlineExceeded, marked so that IsIdleTimeout() is true, and the
  // connection is dropped. For streams, whose `timeout` is infinite, this is what notices a
  // connection that died without a close (watches: ClientOptions::watch_idle_timeout).
  absl::Duration idle_timeout = absl::InfiniteDuration();
  // Largest body kept in HttpResponse::body (a streamed 2xx body is not kept, so not counted);
  // beyond it the request fails with ResourceExhausted. 0: no limit.
  size_t max_body_bytes = 0;
};

struct HttpResponse {
  long code = 0;
  std::string content_type;
  std::string retry_after;  // the Retry-After header, verbatim
  std::string body;         // empty for streamed responses with a 2xx code
};

// True for the error of a request that received nothing for its HttpRequest::idle_timeout.
bool IsIdleTimeout(const absl::Status& status);

// "64 MiB" for a whole number of MiB, else "<n> bytes": how size limits are written in errors.
std::string ByteLimitText(size_t bytes);

class HttpTransport {
 public:
  static absl::StatusOr<std::unique_ptr<HttpTransport>> Create(RestConfig config);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // A complete request. Transport failures (refused, TLS, timeout) are Unavailable or
  // DeadlineExceeded errors naming the server; any HTTP code is returned as a response.
  absl::StatusOr<HttpResponse> Do(const HttpRequest& request);

  // A streamed request: for a 2xx answer, `on_data` receives the body in chunks as it arrives and
  // may return false to stop. `stopped` is polled between chunks and about once a second while
  // idle; when it returns true the stream is closed. Returns the response (with the body only for
  // non-2xx).
  absl::StatusOr<HttpResponse> Stream(const HttpRequest& request,
                                      const std::function<bool(absl::string_view)>& on_data,
                                      const std::function<bool()>& stopped);

  const RestConfig& config() const { return config_; }

  // The error text to add to a 401, e.g. "client certificate expired at 2026-01-01T00:00:00Z".
  const std::string& credential_hint() const { return credential_hint_; }

 private:
  explicit HttpTransport(RestConfig config);
  // One request/response exchange; `on_data` and `stopped` are null for Do().
  absl::StatusOr<HttpResponse> Exchange(const HttpRequest& request,
                                        const std::function<bool(absl::string_view)>* on_data,
                                        const std::function<bool()>* stopped);
  // A pooled connection (`*reused` true) or a new one.
  absl::StatusOr<std::unique_ptr<Connection>> Borrow(absl::Time deadline, bool* reused);
  void Return(std::unique_ptr<Connection> conn);
  std::string RequestHead(const HttpRequest& request);
  std::string BearerToken();

  const RestConfig config_;
  std::string credential_hint_;
  Endpoint endpoint_;
  std::shared_ptr<TlsContext> tls_;  // null for http://

  absl::Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ ABSL_GUARDED_BY(mu_);
  std::string token_ ABSL_GUARDED_BY(mu_);
  std::string token_version_ ABSL_GUARDED_BY(mu_);  // inode:size:mtime of the token file read
};

}  // namespace dra::k8s
