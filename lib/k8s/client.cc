#include "lib/k8s/client.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "lib/common/backoff.h"
#include "lib/common/json_access.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/url.h"
#include "lib/k8s/wire_decode.h"

namespace dra::k8s {
namespace {

std::string Describe(absl::string_view verb, const ResourceInfo& r, absl::string_view ns,
                     absl::string_view name) {
  std::string what = absl::StrCat(verb, " ", r.plural);
  if (!r.group.empty()) absl::StrAppend(&what, ".", r.group);
  if (!name.empty() || (r.namespaced && !ns.empty())) {
    absl::StrAppend(&what, " ", r.namespaced && !ns.empty() ? absl::StrCat(ns, "/") : "", name);
  }
  return what;
}

// Objects here are the caller's, not the server's; still read without a throwing accessor.
std::string NameOf(const nlohmann::json& object) {
  return json_access::StringOr(json_access::MemberOrNull(object, "metadata"), "name");
}

}  // namespace

std::string ResourcePath(const ResourceInfo& r, absl::string_view ns, absl::string_view name,
                         absl::string_view subresource) {
  std::string path = r.group.empty() ? absl::StrCat("/api/", r.version)
                                     : absl::StrCat("/apis/", r.group, "/", r.version);
  if (r.namespaced && !ns.empty()) absl::StrAppend(&path, "/namespaces/", ns);
  absl::StrAppend(&path, "/", r.plural);
  if (!name.empty()) absl::StrAppend(&path, "/", name);
  if (!subresource.empty()) absl::StrAppend(&path, "/", subresource);
  return path;
}

Client::Client(std::unique_ptr<HttpTransport> transport, ClientOptions options)
    : transport_(std::move(transport)),
      options_(std::move(options)),
      tokens_(options_.burst),
      last_refill_(absl::Now()) {}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(RestConfig config, ClientOptions options) {
  ASSIGN_OR_RETURN(auto transport, HttpTransport::Create(std::move(config)));
  return std::unique_ptr<Client>(new Client(std::move(transport), std::move(options)));
}

void Client::WaitForToken() {
  if (options_.qps <= 0) return;
  absl::Duration wait;
  {
    absl::MutexLock lock(&limiter_mu_);
    absl::Time now = absl::Now();
    tokens_ = std::min<double>(options_.burst,
                               tokens_ + absl::ToDoubleSeconds(now - last_refill_) * options_.qps);
    last_refill_ = now;
    tokens_ -= 1;  // may go negative: later callers queue behind earlier ones
    if (tokens_ >= 0) return;
    wait = absl::Seconds(-tokens_ / options_.qps);
  }
  absl::SleepFor(wait);
}

absl::StatusOr<nlohmann::json> Client::Call(HttpRequest request, absl::string_view what) {
  std::string w(what);
  ASSIGN_OR_RETURN(std::string body, CallBody(std::move(request), w));
  if (body.empty()) return nlohmann::json::object();
  absl::StatusOr<nlohmann::json> j = json_access::Parse(body);
  if (!j.ok()) return absl::InternalError(absl::StrCat(w, ": response: ", j.status().message()));
  return j;
}

absl::StatusOr<std::string> Client::CallBody(HttpRequest request, absl::string_view what) {
  request.timeout = options_.request_timeout;
  request.max_body_bytes = options_.max_body_bytes;
  Backoff backoff(options_.retry_backoff);
  for (int attempt = 0;; ++attempt) {
    WaitForToken();
    auto response = transport_->Do(request);
    if (!response.ok()) return Annotate(response.status(), what);
    if (response->code >= 200 && response->code < 300) return std::move(response->body);
    absl::Status s = StatusFromHttp(response->code, response->body, response->retry_after, what);
    if (response->code == 401 && !transport_->credential_hint().empty()) {
      s = absl::Status(s.code(), absl::StrCat(s.message(), ": ", transport_->credential_hint(),
                                              " (", transport_->config().source, ")"));
      s.SetPayload(kReasonPayload, absl::Cord("Unauthorized"));
    } else if (response->code == 401) {
      s = absl::Status(s.code(), absl::StrCat(s.message(), ": credentials rejected (",
                                              transport_->config().source, ")"));
      s.SetPayload(kReasonPayload, absl::Cord("Unauthorized"));
    }
    // 429 means the server did not process the request, and a 5xx with Retry-After says it may be
    // sent again; a plain 5xx is retried only for reads, since a write may have been applied.
    const absl::Duration server_delay = RetryAfter(s);
    const bool read = request.method == "GET" || request.method == "HEAD";
    const bool retriable = response->code == 429 ||
                           (response->code >= 500 && (server_delay > absl::ZeroDuration() || read));
    if (!retriable || attempt >= options_.max_retries) return s;
    // The next backoff step is taken in any case, so a server that keeps answering with a short
    // Retry-After still sees the gaps grow; Retry-After is honoured as a lower bound, up to 10 s.
    const absl::Duration step = backoff.Next();
    const absl::Duration delay = std::max(std::min(server_delay, absl::Seconds(10)), step);
    DRA_VLOG(2, "retrying after an error answer", "request", what, "code", response->code,
             "retry_after", server_delay, "delay", delay, "attempt", attempt + 1);
    absl::SleepFor(delay);
  }
}

absl::StatusOr<nlohmann::json> Client::Get(const ResourceInfo& r, absl::string_view ns,
                                           absl::string_view name) {
  return Call({.method = "GET", .path_and_query = ResourcePath(r, ns, name)},
              Describe("get", r, ns, name));
}

absl::StatusOr<ListPage> Client::ListPageOf(const ResourceInfo& r, absl::string_view ns,
                                            const ListOptions& o) {
  std::string q;
  AddQueryParam(q, "labelSelector", o.label_selector);
  AddQueryParam(q, "fieldSelector", o.field_selector);
  if (o.limit > 0) AddQueryParam(q, "limit", absl::StrCat(o.limit));
  AddQueryParam(q, "continue", o.continue_token);
  AddQueryParam(q, "resourceVersion", o.resource_version);
  const std::string what = Describe("list", r, ns, "");
  ASSIGN_OR_RETURN(std::string body,
                   CallBody({.method = "GET", .path_and_query = ResourcePath(r, ns) + q}, what));
  absl::StatusOr<ListPage> page = ParseListPage(body);
  // A malformed page fails this list (the caller retries or reports it), never the process.
  if (!page.ok()) return Annotate(page.status(), absl::StrCat(what, ": response"));
  return page;
}

absl::StatusOr<ListPage> Client::ListAllOf(const ResourceInfo& r, absl::string_view ns,
                                           ListOptions options) {
  ListPage all;
  do {
    ASSIGN_OR_RETURN(ListPage page, ListPageOf(r, ns, options));
    for (nlohmann::json& item : page.items) all.items.push_back(std::move(item));
    for (UndecodableObject& u : page.undecodable) all.undecodable.push_back(std::move(u));
    all.resource_version = std::move(page.resource_version);
    options.continue_token = std::move(page.continue_token);
    // Later pages are served from the snapshot the continue token names.
    options.resource_version.clear();
  } while (!options.continue_token.empty());
  return all;
}

absl::StatusOr<nlohmann::json> Client::List(const ResourceInfo& r, absl::string_view ns,
                                            const ListOptions& o) {
  ASSIGN_OR_RETURN(ListPage page, ListPageOf(r, ns, o));
  for (const UndecodableObject& u : page.undecodable) ReportUndecodable(r, u);
  nlohmann::json meta = nlohmann::json::object();
  if (!page.resource_version.empty()) meta["resourceVersion"] = page.resource_version;
  if (!page.continue_token.empty()) meta["continue"] = page.continue_token;
  return nlohmann::json{{"items", std::move(page.items)}, {"metadata", std::move(meta)}};
}

absl::StatusOr<nlohmann::json> Client::ListAll(const ResourceInfo& r, absl::string_view ns,
                                               ListOptions options) {
  ASSIGN_OR_RETURN(ListPage all, ListAllOf(r, ns, std::move(options)));
  for (const UndecodableObject& u : all.undecodable) ReportUndecodable(r, u);
  return nlohmann::json{{"items", std::move(all.items)},
                        {"metadata", {{"resourceVersion", all.resource_version}}}};
}

absl::StatusOr<nlohmann::json> Client::Create(const ResourceInfo& r, absl::string_view ns,
                                              const nlohmann::json& object) {
  std::string name = NameOf(object);
  return Call({.method = "POST",
               .path_and_query = ResourcePath(r, ns),
               .content_type = "application/json",
               .body = object.dump()},
              Describe("create", r, ns, name));
}

absl::StatusOr<nlohmann::json> Client::Update(const ResourceInfo& r, absl::string_view ns,
                                              const nlohmann::json& object,
                                              absl::string_view subresource) {
  std::string name = NameOf(object);
  if (name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe("update", r, ns, ""), ": metadata.name is required"));
  }
  return Call({.method = "PUT",
               .path_and_query = ResourcePath(r, ns, name, subresource),
               .content_type = "application/json",
               .body = object.dump()},
              Describe(subresource.empty() ? "update" : "update status", r, ns, name));
}

absl::Status Client::Delete(const ResourceInfo& r, absl::string_view ns, absl::string_view name,
                            const DeleteOptions& o) {
  nlohmann::json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (!o.uid.empty()) body["preconditions"]["uid"] = o.uid;
  if (!o.resource_version.empty()) body["preconditions"]["resourceVersion"] = o.resource_version;
  if (!o.propagation_policy.empty()) body["propagationPolicy"] = o.propagation_policy;
  if (o.grace_period_seconds) body["gracePeriodSeconds"] = *o.grace_period_seconds;
  return Call({.method = "DELETE",
               .path_and_query = ResourcePath(r, ns, name),
               .content_type = "application/json",
               .body = body.dump()},
              Describe("delete", r, ns, name))
      .status();
}

absl::StatusOr<nlohmann::json> Client::MergePatch(const ResourceInfo& r, absl::string_view ns,
                                                  absl::string_view name,
                                                  const nlohmann::json& patch,
                                                  absl::string_view subresource) {
  return Call({.method = "PATCH",
               .path_and_query = ResourcePath(r, ns, name, subresource),
               .content_type = "application/merge-patch+json",
               .body = patch.dump()},
              Describe("patch", r, ns, name));
}

absl::StatusOr<nlohmann::json> Client::Apply(const ResourceInfo& r, absl::string_view ns,
                                             const nlohmann::json& object, bool force,
                                             absl::string_view subresource,
                                             absl::string_view field_manager) {
  std::string name = NameOf(object);
  std::string q;
  AddQueryParam(q, "fieldManager",
                field_manager.empty() ? options_.field_manager : std::string(field_manager));
  if (force) AddQueryParam(q, "force", "true");
  return Call({.method = "PATCH",
               .path_and_query = ResourcePath(r, ns, name, subresource) + q,
               .content_type = "application/apply-patch+yaml",
               .body = object.dump()},  // JSON is valid YAML
              Describe("apply", r, ns, name));
}

absl::StatusOr<std::string> Client::GetRaw(absl::string_view path) {
  WaitForToken();
  ASSIGN_OR_RETURN(HttpResponse response,
                   transport_->Do({.method = "GET",
                                   .path_and_query = std::string(path),
                                   .timeout = options_.request_timeout,
                                   .max_body_bytes = options_.max_body_bytes}));
  if (response.code < 200 || response.code >= 300) {
    return StatusFromHttp(response.code, response.body, response.retry_after,
                          absl::StrCat("get ", path));
  }
  return response.body;
}

absl::Status RetryOnConflict(const std::function<absl::Status()>& fn, int attempts) {
  thread_local std::minstd_rand rng(std::random_device{}());
  absl::Status s;
  for (int i = 0; i < attempts; ++i) {
    s = fn();
    if (!IsConflict(s)) return s;
    // client-go's DefaultRetry: 10ms steps, factor 1, jitter 0.1.
    absl::SleepFor(absl::Milliseconds(10 + rng() % 5));
  }
  return s;
}

}  // namespace dra::k8s
