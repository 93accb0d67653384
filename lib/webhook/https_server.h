#pragma once

// The admission webhook's HTTPS server: the server core (lib/httpserver/server.h, which states
// the behaviour: deadlines, connection cap, request budget, graceful Stop) with its TLS layer,
// keep-alive, several loops, and the webhook's limits and metric names.
//
// Any pod can reach the webhook, and under `failurePolicy: Fail` a stalled webhook blocks claim
// creation cluster-wide: hence the overall deadlines and the budget across connections.
//
// The certificate comes from a ServingCertificate at each accepted connection, so a rotated
// certificate is used by the next connection.
//
// Start sets SIGPIPE to be ignored process-wide: OpenSSL writes to sockets with write(2).
//
// Thread-safety: the handler runs on the loop threads, concurrently, and must be thread-safe; it
// should return quickly (the review handler takes about 10 µs): while it runs, the other
// connections of its loop wait. Start/Stop/port from any thread.

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/httpserver/request.h"
#include "lib/httpserver/server.h"
#include "lib/webhook/tls_certs.h"

namespace dra::webhook {

// The kube-apiserver gives up on a webhook call after the webhook's timeoutSeconds (default 10 s,
// which the chart keeps; at most 30 s) for connect, handshake, request and response together, so
// a legitimate caller never needs longer than these; a client that does is holding a slot.
inline constexpr absl::Duration kHandshakeTimeout = absl::Seconds(5);
inline constexpr absl::Duration kRequestTimeout = absl::Seconds(8);
inline constexpr absl::Duration kWriteTimeout = absl::Seconds(10);
// Between requests on a kept-alive connection. Longer than the API server's 90 s idle connection
// timeout, so that it closes first: it does not retry a POST on a connection we closed under it.
inline constexpr absl::Duration kIdleTimeout = absl::Seconds(120);
// Open connections at most. The API servers use a handful; the rest is room for slow clients.
inline constexpr int kMaxConnections = 2048;
// The default budget of request buffers, all connections together: 21 requests of the largest
// size (3 MiB) at once, or thousands of typical reviews (2-20 KiB).
inline constexpr size_t kMaxBufferedRequestBytes = 64 << 20;
// The name of the epoll loop threads (/proc/<pid>/task/<tid>/comm; at most 15 bytes).
inline constexpr char kLoopThreadName[] = "https-loop";

using httpserver::HttpRequest;
using httpserver::HttpResponse;
using HttpsHandler = httpserver::HttpHandler;
using HttpsServer = httpserver::Server;

// The server core's options with the webhook's defaults: ":443", TLS, keep-alive, 3 MiB bodies,
// 64 KiB headers, the budget above, the timeouts above, loops by CPU count, a 10 s grace at Stop,
// metrics named nvidia_dra_webhook_* (docs/webhook.md "Metrics").
struct HttpsServerOptions : httpserver::ServerOptions {
  HttpsServerOptions();
};

// Binds, listens and starts serving with TLS from `certs`, which must outlive the server. Fails
// when the budget is below one largest request.
absl::StatusOr<std::unique_ptr<HttpsServer>> StartHttpsServer(HttpsServerOptions options,
                                                              ServingCertificate* certs,
                                                              HttpsHandler handler);

}  // namespace dra::webhook
