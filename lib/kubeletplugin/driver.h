#pragma once

// The interface a DRA driver implements to be served to the kubelet by PluginServer, and the plain
// types that cross it (PreparedDevice is in plugin_types.h, so that the plugins' checkpoint records
// can hold one without this header). Nothing here knows about gRPC or about any particular kind
// of device.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "lib/k8s/objects_resource.h"
#include "lib/kubeletplugin/plugin_types.h"

namespace dra::kubeletplugin {

// One claim named by the kubelet. All three fields are always set.
struct ClaimRef {
  std::string namespace_name;
  std::string name;
  std::string uid;

  // "namespace/name", the way claims are named in messages.
  std::string String() const { return namespace_name + "/" + name; }
};

// The outcome of preparing one claim. A non-OK `status` means this claim failed (its devices are
// then ignored and the kubelet retries later); other claims of the same call are unaffected.
struct PrepareResult {
  absl::Status status;
  std::vector<PreparedDevice> devices;
};

// Facts about the kubelet call a driver method runs for.
struct CallInfo {
  // Monotonically increasing per PluginServer; appears in every log line of the call. Drivers
  // should log it too ("request_id") so one call can be followed across layers.
  uint64_t request_id = 0;
  // When the kubelet gives up on the call (it uses 45 s), or absl::InfiniteFuture() if the
  // client set none. Work that would run past it is wasted: the kubelet retries anyway.
  absl::Time deadline = absl::InfiniteFuture();
};

// Implemented by a DRA driver. PluginServer calls it from gRPC threads.
//
// Threading contract: with PluginServerOptions::serialize (the default) no two calls of
// PrepareResourceClaims/UnprepareResourceClaims overlap: within one process they are ordered by a
// mutex, and in rolling-update mode also across all instances sharing the plugin data directory
// (by a flock). With serialize = false the methods may run concurrently on any threads and the
// driver must synchronise itself. In both modes the same claim may be prepared or unprepared
// again after a kubelet or plugin restart, and (with rolling updates) by another process than the
// one that prepared it, so both methods must be idempotent and must keep what they need across
// calls in files, not in memory. The driver must outlive the PluginServer serving it.
class DraDriver {
 public:
  virtual ~DraDriver() = default;

  // Prepares `claims`: each was just read from the API server, is allocated, and has the UID the
  // kubelet asked for; they come in request order. Returns a result per claim UID. A UID missing
  // from the map is reported to the kubelet as a failure of that claim; extra UIDs are dropped.
  // A non-OK return fails the whole kubelet call (every claim is retried); prefer per-claim
  // errors.
  virtual absl::StatusOr<std::map<std::string, PrepareResult>> PrepareResourceClaims(
      const CallInfo& call, const std::vector<k8s::ResourceClaim>& claims) = 0;

  // Undoes PrepareResourceClaims for `claims`. The claims may no longer exist in the API server,
  // so everything needed must have been recorded at prepare time. A claim that is not prepared
  // must succeed. Returns a status per claim UID, with the same missing/extra UID rules and the
  // same meaning of a non-OK return as PrepareResourceClaims.
  virtual absl::StatusOr<std::map<std::string, absl::Status>> UnprepareResourceClaims(
      const CallInfo& call, const std::vector<ClaimRef>& claims) = 0;
};

// "req/sub" -> "req"; "req" -> "req". The kubelet matches containers' claim requests against
// base request names only.
std::string BaseRequestName(absl::string_view request_name);

}  // namespace dra::kubeletplugin
