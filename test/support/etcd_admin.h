#pragma once

// Direct access to the local cluster's etcd (hack/cluster/up.sh: plain HTTP on loopback) for tests
// that must create a storage condition instead of waiting for one, such as a compacted history.
// Uses etcd's JSON gateway (/v3/kv/...), where int64 fields travel as decimal strings.

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/k8s/http.h"
#include "nlohmann/json.hpp"

namespace dra::testing {

// The etcd client URL; DRA_ETCD_PORT overrides the port as it does for hack/cluster/lib.sh.
inline std::string EtcdUrl() {
  const char* port = std::getenv("DRA_ETCD_PORT");
  return absl::StrCat("http://127.0.0.1:", port != nullptr && *port != '\0' ? port : "2379");
}

namespace etcd_internal {

inline absl::StatusOr<nlohmann::json> Post(const std::string& path, const nlohmann::json& body) {
  k8s::RestConfig cfg{.server = EtcdUrl(), .source = "etcd " + EtcdUrl()};
  auto transport = k8s::HttpTransport::Create(cfg);
  if (!transport.ok()) return transport.status();
  auto response = (*transport)
                      ->Do({.method = "POST",
                            .path_and_query = path,
                            .content_type = "application/json",
                            .body = body.dump()});
  if (!response.ok()) return response.status();
  nlohmann::json j = nlohmann::json::parse(response->body, nullptr, false);
  if (response->code != 200 || j.is_discarded()) {
    return absl::InternalError(
        absl::StrCat("etcd ", EtcdUrl(), path, ": HTTP ", response->code, ": ", response->body));
  }
  return j;
}

inline absl::StatusOr<int64_t> Revision(const nlohmann::json& response) {
  const nlohmann::json* rev = nullptr;
  if (response.contains("header") && response["header"].is_object() &&
      response["header"].contains("revision")) {
    rev = &response["header"]["revision"];
  }
  int64_t n = 0;
  if (rev == nullptr || !rev->is_string() || !absl::SimpleAtoi(rev->get<std::string>(), &n)) {
    return absl::InternalError(
        absl::StrCat("etcd answer has no header.revision string: ", response.dump()));
  }
  return n;
}

}  // namespace etcd_internal

// etcd's current revision (the newest resourceVersion the API server can have handed out).
inline absl::StatusOr<int64_t> EtcdRevision() {
  // A range over one key reads the header only; the key need not exist. "Lw==" is "/".
  auto r = etcd_internal::Post("/v3/kv/range", {{"key", "Lw=="}, {"limit", "1"}});
  if (!r.ok()) return r.status();
  return etcd_internal::Revision(*r);
}

// Compacts etcd's history at its current revision and waits until that is applied (physical), so
// every revision below the returned one is gone from storage. Returns the compaction revision.
inline absl::StatusOr<int64_t> CompactEtcdNow() {
  auto rev = EtcdRevision();
  if (!rev.ok()) return rev.status();
  auto r = etcd_internal::Post("/v3/kv/compaction",
                               {{"revision", absl::StrCat(*rev)}, {"physical", true}});
  // Nothing written since an earlier compaction at this revision: the history is already gone.
  if (!r.ok() && absl::StrContains(r.status().message(), "required revision has been compacted")) {
    return *rev;
  }
  if (!r.ok()) return r.status();
  return *rev;
}

}  // namespace dra::testing
