#include "lib/k8s/http.h"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "lib/common/atomic_file.h"
#include "lib/common/status.h"
#include "lib/k8s/http_parse.h"

namespace dra::k8s {
namespace {

// Idle keep-alive connections kept per transport, and how long one may sit idle: the API server
// and load balancers in front of it drop idle connections after a while.
constexpr size_t kMaxIdleConnections = 8;
constexpr absl::Duration kMaxIdleTime = absl::Seconds(90);
constexpr absl::Duration kConnectTimeout = absl::Seconds(10);
// How often a stream with nothing arriving checks whether its caller stopped it.
constexpr absl::Duration kStopPollInterval = absl::Seconds(1);
// Marks the error of a request that hit its idle_timeout (IsIdleTimeout).
constexpr absl::string_view kIdleTimeoutPayload = "dra.nvidia.com/k8s-idle-timeout";

bool Idempotent(absl::string_view method) {
  return method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE" ||
         method == "OPTIONS";
}

// Reads the client certificate's notAfter; returns a hint when it is already past.
std::string ExpiryHint(const std::string& cert_pem) {
  if (cert_pem.empty()) return "";
  BIO* bio = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (cert == nullptr) return "client certificate is not valid PEM";
  std::string hint;
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    BIO* out = BIO_new(BIO_s_mem());
    ASN1_TIME_print(out, X509_get0_notAfter(cert));
    char* data = nullptr;
    long len = BIO_get_mem_data(out, &data);
    hint = absl::StrCat("client certificate expired (notAfter ", absl::string_view(data, len), ")");
    BIO_free(out);
  }
  X509_free(cert);
  return hint;
}

}  // namespace

HttpTransport::HttpTransport(RestConfig config) : config_(std::move(config)) {}

HttpTransport::~HttpTransport() = default;

absl::StatusOr<std::unique_ptr<HttpTransport>> HttpTransport::Create(RestConfig config) {
  if (!config.bearer_token_file.empty()) {
    auto t = ReadFile(config.bearer_token_file);
    if (!t.ok()) return Annotate(t.status(), "read bearer token file");
  }
  std::string source = config.source.empty() ? config.server : config.source;
  auto endpoint = ParseServerUrl(config.server);
  if (!endpoint.ok()) return Annotate(endpoint.status(), source);
  auto transport = std::unique_ptr<HttpTransport>(new HttpTransport(std::move(config)));
  transport->endpoint_ = std::move(*endpoint);
  if (transport->endpoint_.tls) {
    const RestConfig& c = transport->config_;
    auto tls = TlsContext::Create({.ca_pem = c.ca_pem,
                                   .insecure_skip_verify = c.insecure_skip_tls_verify,
                                   .client_cert_pem = c.client_cert_pem,
                                   .client_key_pem = c.client_key_pem,
                                   .server_name = c.tls_server_name});
    if (!tls.ok()) return Annotate(tls.status(), source);
    transport->tls_ = std::move(*tls);
  }
  transport->credential_hint_ = ExpiryHint(transport->config_.client_cert_pem);
  return transport;
}

absl::StatusOr<std::unique_ptr<Connection>> HttpTransport::Borrow(absl::Time deadline,
                                                                  bool* reused) {
  *reused = false;
  for (;;) {
    std::unique_ptr<Connection> candidate;
    std::vector<std::unique_ptr<Connection>> expired;  // closed outside the lock
    {
      absl::MutexLock lock(&mu_);
      absl::Time now = absl::Now();
      while (!idle_.empty() && candidate == nullptr) {
        std::unique_ptr<Connection> c = std::move(idle_.back());
        idle_.pop_back();
        if (now - c->idle_since > kMaxIdleTime) {
          expired.push_back(std::move(c));
        } else {
          candidate = std::move(c);
        }
      }
    }
    if (candidate == nullptr) break;
    if (!candidate->ClosedWhileIdle()) {
      *reused = true;
      return candidate;
    }
  }
  return Connection::Open(endpoint_, tls_.get(), std::min(deadline, absl::Now() + kConnectTimeout));
}

void HttpTransport::Return(std::unique_ptr<Connection> conn) {
  conn->idle_since = absl::Now();
  absl::MutexLock lock(&mu_);
  if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(conn));
}

std::string HttpTransport::BearerToken() {
  if (config_.bearer_token_file.empty()) return config_.bearer_token;
  // The file's identity: a rotated token is a new file renamed into place (new inode), and the
  // mtime alone can repeat within one filesystem timestamp tick.
  struct stat st {};
  std::string version;
  if (::stat(config_.bearer_token_file.c_str(), &st) == 0) {
    version =
        absl::StrCat(st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
  }
  absl::MutexLock lock(&mu_);
  if (version != token_version_ || token_.empty()) {
    // Projected service-account tokens are rotated in place; re-read whenever the file changed.
    auto t = ReadFile(config_.bearer_token_file);
    if (t.ok()) {
      token_ = std::string(absl::StripAsciiWhitespace(*t));
      token_version_ = version;
    }
  }
  return token_;
}

std::string HttpTransport::RequestHead(const HttpRequest& request) {
  std::string head = absl::StrCat(request.method, " ", endpoint_.base_path, request.path_and_query,
                                  " HTTP/1.1\r\nHost: ", endpoint_.authority,
                                  "\r\nUser-Agent: dra-driver-nvidia-gpu/cpp\r\n"
                                  "Accept: application/json\r\n");
  if (!request.content_type.empty()) {
    absl::StrAppend(&head, "Content-Type: ", request.content_type, "\r\n");
  }
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
      request.method == "PATCH") {
    absl::StrAppend(&head, "Content-Length: ", request.body.size(), "\r\n");
  }
  std::string token = BearerToken();
  if (!token.empty()) absl::StrAppend(&head, "Authorization: Bearer ", token, "\r\n");
  head += "\r\n";
  return head;
}

absl::StatusOr<HttpResponse> HttpTransport::Exchange(
    const HttpRequest& request, const std::function<bool(absl::string_view)>* on_data,
    const std::function<bool()>* stopped) {
  auto fail = [&](const absl::Status& s) {
    return Annotate(s, absl::StrCat(request.method, " ", config_.server, request.path_and_query));
  };
  for (char c : request.path_and_query) {
    if (c == '\r' || c == '\n' || c == ' ') {
      return fail(absl::InvalidArgumentError("request path has a space or line end"));
    }
  }
  if (request.path_and_query.empty() || request.path_and_query[0] != '/') {
    return fail(absl::InvalidArgumentError("request path must start with \"/\""));
  }
  const bool streaming = on_data != nullptr;
  const absl::Time deadline = request.timeout == absl::InfiniteDuration()
                                  ? absl::InfiniteFuture()
                                  : absl::Now() + request.timeout;
  const std::string wire = RequestHead(request) + request.body;
  char buf[16 * 1024];

  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    auto borrowed = Borrow(deadline, &reused);
    if (!borrowed.ok()) return fail(borrowed.status());
    std::unique_ptr<Connection> conn = std::move(*borrowed);
    // A kept-alive connection can be closed by the server at any moment; when that is what
    // happened, a retry on a fresh connection is safe if the request is idempotent or did not
    // leave at all.
    bool sent = false;
    absl::Status result = conn->WriteAll(wire, deadline, &sent);
    const bool may_retry = reused && attempt == 0 && (Idempotent(request.method) || !sent);
    if (!result.ok()) {
      if (may_retry && result.code() != absl::StatusCode::kDeadlineExceeded) continue;
      return fail(result);
    }

    HttpResponse response;
    ResponseParser parser(request.method == "HEAD");
    bool stop = false;
    absl::Status body_error;
    auto sink = [&](absl::string_view chunk) -> bool {
      int code = parser.head().code;
      if (!streaming || code < 200 || code >= 300) {
        if (request.max_body_bytes > 0 &&
            response.body.size() + chunk.size() > request.max_body_bytes) {
          body_error = absl::ResourceExhaustedError(absl::StrCat(
              "response body larger than the ", ByteLimitText(request.max_body_bytes), " limit"));
          return false;
        }
        response.body.append(chunk.data(), chunk.size());
        return true;
      }
      if ((*stopped)() || !(*on_data)(chunk)) {
        stop = true;
        return false;
      }
      return true;
    };
    bool eof = false;
    // The idle clock runs from the request's end to the last byte received (infinite: none).
    absl::Time last_byte = absl::Now();
    while (result.ok() && !parser.done() && !parser.aborted()) {
      absl::Time wait_until = std::min(deadline, last_byte + request.idle_timeout);
      if (streaming) wait_until = std::min(wait_until, absl::Now() + kStopPollInterval);
      size_t n = 0;
      auto r = conn->Read(buf, sizeof(buf), wait_until, &n);
      if (!r.ok()) {
        result = r.status();
      } else if (*r == Connection::ReadResult::kTimeout) {
        const absl::Time now = absl::Now();
        if (now >= deadline) {
          result = absl::DeadlineExceededError(absl::StrCat(
              "timed out after ", absl::FormatDuration(request.timeout),
              parser.started() ? " reading the response" : " waiting for the response"));
        } else if (streaming && (*stopped)()) {
          stop = true;
          break;
        } else if (now - last_byte >= request.idle_timeout) {
          result = absl::DeadlineExceededError(
              absl::StrCat("nothing received for ", absl::FormatDuration(request.idle_timeout),
                           parser.started() ? " in the response" : " waiting for the response",
                           " (the idle limit): the connection is presumed dead"));
          result.SetPayload(kIdleTimeoutPayload, absl::Cord("1"));
        }
      } else if (*r == Connection::ReadResult::kEof) {
        eof = true;
        result = parser.Finish();
      } else {
        last_byte = absl::Now();
        result = parser.Feed(absl::string_view(buf, n), sink);
      }
      if (!body_error.ok()) result = body_error;  // the connection is dropped, not pooled
    }
    if (!result.ok()) {
      if (!parser.started() && may_retry && result.code() != absl::StatusCode::kDeadlineExceeded) {
        continue;
      }
      return fail(result);
    }
    response.code = parser.head().code;
    response.content_type = parser.head().Header("content-type");
    response.retry_after = parser.head().Header("retry-after");
    // A stream stopped half-way leaves the connection mid-response: it is closed, not pooled.
    if (!stop && !eof && parser.reusable()) Return(std::move(conn));
    return response;
  }
}

bool IsIdleTimeout(const absl::Status& status) {
  return status.GetPayload(kIdleTimeoutPayload).has_value();
}

std::string ByteLimitText(size_t bytes) {
  constexpr size_t kMiB = size_t{1} << 20;
  if (bytes >= kMiB && bytes % kMiB == 0) return absl::StrCat(bytes / kMiB, " MiB");
  return absl::StrCat(bytes, " bytes");
}

absl::StatusOr<HttpResponse> HttpTransport::Do(const HttpRequest& request) {
  return Exchange(request, nullptr, nullptr);
}

absl::StatusOr<HttpResponse> HttpTransport::Stream(
    const HttpRequest& request, const std::function<bool(absl::string_view)>& on_data,
    const std::function<bool()>& stopped) {
  static const std::function<bool()> kNever = [] { return false; };
  return Exchange(request, &on_data, stopped ? &stopped : &kNever);
}

}  // namespace dra::k8s
