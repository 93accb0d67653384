#include "lib/k8s/http.h"

#include <curl/curl.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "lib/common/atomic_file.h"
#include "lib/common/status.h"

namespace dra::k8s {
namespace {

constexpr size_t kMaxIdleHandles = 8;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
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

struct Sink {
  HttpResponse* response;
  const std::function<bool(absl::string_view)>* on_data = nullptr;  // streaming only
  const std::function<bool()>* stopped = nullptr;
  bool aborted_by_caller = false;
};

size_t OnHeader(char* buffer, size_t size, size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  absl::string_view line(buffer, size * n);
  auto colon = line.find(':');
  if (colon != absl::string_view::npos) {
    std::string name = absl::AsciiStrToLower(line.substr(0, colon));
    std::string value(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    if (name == "content-type") sink->response->content_type = value;
    if (name == "retry-after") sink->response->retry_after = value;
  }
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  absl::string_view chunk(data, size * n);
  if (sink->on_data == nullptr || sink->response->code < 200 || sink->response->code >= 300) {
    sink->response->body.append(chunk.data(), chunk.size());
    return chunk.size();
  }
  if ((sink->stopped && (*sink->stopped)()) || !(*sink->on_data)(chunk)) {
    sink->aborted_by_caller = true;
    return 0;  // makes curl stop with CURLE_WRITE_ERROR
  }
  return chunk.size();
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* sink = static_cast<Sink*>(user);
  if (sink->stopped && (*sink->stopped)()) {
    sink->aborted_by_caller = true;
    return 1;
  }
  return 0;
}

}  // namespace

struct HttpTransport::Handle {
  CURL* curl = nullptr;
  curl_slist* headers = nullptr;
  char error[CURL_ERROR_SIZE] = {};
  ~Handle() {
    if (headers) curl_slist_free_all(headers);
    if (curl) curl_easy_cleanup(curl);
  }
};

HttpTransport::HttpTransport(RestConfig config) : config_(std::move(config)) {}
HttpTransport::~HttpTransport() = default;

absl::StatusOr<std::unique_ptr<HttpTransport>> HttpTransport::Create(RestConfig config) {
  GlobalInit();
  if (!config.bearer_token_file.empty()) {
    auto t = ReadFile(config.bearer_token_file);
    if (!t.ok()) return Annotate(t.status(), "read bearer token file");
  }
  auto transport = std::unique_ptr<HttpTransport>(new HttpTransport(std::move(config)));
  transport->credential_hint_ = ExpiryHint(transport->config_.client_cert_pem);
  return transport;
}

std::unique_ptr<HttpTransport::Handle> HttpTransport::Borrow() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      auto h = std::move(idle_.back());
      idle_.pop_back();
      return h;
    }
  }
  auto h = std::make_unique<Handle>();
  h->curl = curl_easy_init();
  return h;
}

void HttpTransport::Return(std::unique_ptr<Handle> handle) {
  if (handle->headers) {
    curl_slist_free_all(handle->headers);
    handle->headers = nullptr;
  }
  absl::MutexLock lock(&mu_);
  if (idle_.size() < kMaxIdleHandles) idle_.push_back(std::move(handle));
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

absl::Status HttpTransport::Configure(Handle& h, const HttpRequest& request) {
  CURL* c = h.curl;
  curl_easy_reset(c);
  h.error[0] = '\0';
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h.error);
  std::string url = config_.server + request.path_and_query;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  if (request.method == "GET") curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
      request.method == "PATCH") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  }
  if (!config_.ca_pem.empty()) {
    curl_blob ca{const_cast<char*>(config_.ca_pem.data()), config_.ca_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
  }
  if (config_.insecure_skip_tls_verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!config_.client_cert_pem.empty()) {
    curl_blob cert{const_cast<char*>(config_.client_cert_pem.data()),
                   config_.client_cert_pem.size(), CURL_BLOB_COPY};
    curl_blob key{const_cast<char*>(config_.client_key_pem.data()), config_.client_key_pem.size(),
                  CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
  }
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  headers = curl_slist_append(headers, "User-Agent: dra-driver-nvidia-gpu/cpp");
  headers = curl_slist_append(headers, "Expect:");
  if (!request.content_type.empty()) {
    headers = curl_slist_append(headers, ("Content-Type: " + request.content_type).c_str());
  }
  std::string token = BearerToken();
  if (!token.empty()) {
    headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
  }
  h.headers = headers;
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  return absl::OkStatus();
}

namespace {

absl::Status TransportError(CURLcode rc, const char* detail, const std::string& server,
                            const HttpRequest& request) {
  std::string what = absl::StrCat(request.method, " ", server, request.path_and_query, ": ",
                                  *detail ? detail : curl_easy_strerror(rc));
  if (rc == CURLE_OPERATION_TIMEDOUT) return absl::DeadlineExceededError(what);
  return absl::UnavailableError(what);
}

}  // namespace

absl::StatusOr<HttpResponse> HttpTransport::Do(const HttpRequest& request) {
  auto h = Borrow();
  RETURN_IF_ERROR(Configure(*h, request));
  HttpResponse response;
  Sink sink{&response};
  curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(request.timeout)));
  curl_easy_setopt(h->curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, &sink);
  curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &sink);
  CURLcode rc = curl_easy_perform(h->curl);
  if (rc != CURLE_OK) {
    absl::Status s = TransportError(rc, h->error, config_.server, request);
    Return(std::move(h));
    return s;
  }
  curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &response.code);
  Return(std::move(h));
  return response;
}

absl::StatusOr<HttpResponse> HttpTransport::Stream(
    const HttpRequest& request, const std::function<bool(absl::string_view)>& on_data,
    const std::function<bool()>& stopped) {
  auto h = Borrow();
  RETURN_IF_ERROR(Configure(*h, request));
  HttpResponse response;
  Sink sink{&response, &on_data, &stopped};
  // The status line arrives before the body, so the code is known by the first body chunk.
  curl_easy_setopt(
      h->curl, CURLOPT_HEADERFUNCTION, +[](char* b, size_t s, size_t n, void* u) -> size_t {
        auto* sk = static_cast<Sink*>(u);
        absl::string_view line(b, s * n);
        if (absl::StartsWith(line, "HTTP/")) {
          auto sp = line.find(' ');
          if (sp != absl::string_view::npos) {
            sk->response->code = std::strtol(line.data() + sp + 1, nullptr, 10);
          }
        }
        return OnHeader(b, s, n, u);
      });
  curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, &sink);
  curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(h->curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h->curl, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(h->curl, CURLOPT_XFERINFODATA, &sink);
  CURLcode rc = curl_easy_perform(h->curl);
  if (rc != CURLE_OK && !sink.aborted_by_caller) {
    absl::Status s = TransportError(rc, h->error, config_.server, request);
    // A stream cut mid-way leaves the connection unusable; do not pool the handle.
    return s;
  }
  long code = 0;
  curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &code);
  if (code != 0) response.code = code;
  if (!sink.aborted_by_caller) Return(std::move(h));
  return response;
}

}  // namespace dra::k8s
