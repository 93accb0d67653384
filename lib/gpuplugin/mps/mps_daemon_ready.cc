// MpsControlDaemon::AssertReady: is the daemon's Deployment ready, and if not, why not, in words
// an operator can act on.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/common/backoff.h"
#include "lib/common/json_access.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/gpuplugin/mps/mps_daemon.h"
#include "lib/k8s/objects_core.h"

namespace dra::gpu {
namespace {

using nlohmann::json;

constexpr char kContainerName[] = "mps-control-daemon";

// Diagnostics only: what the server sent is read leniently (lib/common/json_access.h), a field of
// an unexpected type reads as absent and never stops the explanation.
const json& Field(const json& j, const char* key) { return json_access::MemberOrNull(j, key); }
const json& Array(const json& j, const char* key) { return json_access::ArrayOrEmpty(j, key); }
std::string Str(const json& j, const char* key) { return json_access::StringOr(j, key); }
int64_t Int(const json& j, const char* key) { return json_access::IntOr(j, key); }

// "reason: message", "reason" or "message".
std::string ReasonMessage(const json& j) {
  std::string reason = Str(j, "reason"), message = Str(j, "message");
  if (reason.empty()) return message;
  return message.empty() ? reason : absl::StrCat(reason, ": ", message);
}

std::string Terminated(const json& t) {
  std::string out = absl::StrCat("exit code ", Int(t, "exitCode"));
  if (!Str(t, "reason").empty()) absl::StrAppend(&out, " (", Str(t, "reason"), ")");
  if (!Str(t, "message").empty()) absl::StrAppend(&out, ": ", Str(t, "message"));
  if (!Str(t, "finishedAt").empty()) absl::StrAppend(&out, " at ", Str(t, "finishedAt"));
  return out;
}

const json& Condition(const json& status, absl::string_view type) {
  static const json kNull;
  for (const json& c : Array(status, "conditions")) {
    if (Str(c, "type") == type) return c;
  }
  return kNull;
}

bool PodReady(const json& pod) {
  const json& status = Field(pod, "status");
  if (!Field(Field(pod, "metadata"), "deletionTimestamp").is_null()) return false;
  if (Str(status, "phase") != "Running") return false;
  if (Str(Condition(status, "Ready"), "status") != "True") return false;
  const json& statuses = Field(status, "containerStatuses");
  return statuses.is_array() && statuses.size() == 1 && Field(statuses[0], "ready") == true;
}

}  // namespace

absl::Status MpsControlDaemon::CheckReadyOnce() {
  const std::string name = DeploymentName();
  const std::string ns_name = absl::StrCat(env_.ns, "/", name);
  absl::StatusOr<json> deployment = env_.client->Get(kDeploymentResource, env_.ns, name);
  if (absl::IsNotFound(deployment.status())) {
    return absl::UnavailableError(absl::StrCat("Deployment ", ns_name, " does not exist"));
  }
  if (!deployment.ok()) {
    return Annotate(deployment.status(), absl::StrCat("get Deployment ", ns_name));
  }
  const int64_t ready_replicas = Int(Field(*deployment, "status"), "readyReplicas");
  k8s::ListOptions list;
  list.label_selector = absl::StrCat("app=", name);
  absl::StatusOr<json> pods = env_.client->List(k8s::Pod::kResource, env_.ns, list);
  if (!pods.ok()) {
    return Annotate(pods.status(), absl::StrCat("list pods of Deployment ", ns_name));
  }
  const json& items = Array(*pods, "items");
  if (ready_replicas == 1 && items.size() == 1 && PodReady(items[0])) return absl::OkStatus();

  if (items.empty()) {
    std::string why = absl::StrCat("Deployment ", ns_name, " has no pod");
    const json& status = Field(*deployment, "status");
    for (absl::string_view type : {"ReplicaFailure", "Progressing", "Available"}) {
      const json& c = Condition(status, type);
      if (!c.is_null() && !ReasonMessage(c).empty()) {
        absl::StrAppend(&why, "; ", type, "=", Str(c, "status"), " ", ReasonMessage(c));
      }
    }
    return absl::UnavailableError(why);
  }
  if (items.size() > 1) {
    std::vector<std::string> names;
    for (const json& p : items) {
      const bool deleting = !Field(Field(p, "metadata"), "deletionTimestamp").is_null();
      names.push_back(absl::StrCat(Str(Field(p, "metadata"), "name"), " (",
                                   deleting ? "Terminating" : Str(Field(p, "status"), "phase"),
                                   ")"));
    }
    return absl::UnavailableError(absl::StrCat("Deployment ", ns_name, " has ", items.size(),
                                               " pods, expected 1: ", absl::StrJoin(names, ", ")));
  }

  // One pod that is not ready (or a Deployment that has not counted it yet).
  const json& pod = items[0];
  const std::string pod_name = Str(Field(pod, "metadata"), "name");
  const json& status = Field(pod, "status");
  std::string why = absl::StrCat("pod ", env_.ns, "/", pod_name, " on node ", env_.node_name, " ",
                                 Str(status, "phase"));
  if (!Field(Field(pod, "metadata"), "deletionTimestamp").is_null()) {
    absl::StrAppend(&why, " (terminating)");
  }
  const json& scheduled = Condition(status, "PodScheduled");
  if (Str(scheduled, "status") == "False") {
    absl::StrAppend(&why, ", not scheduled: ", ReasonMessage(scheduled));
  }
  bool restarted = false;
  const json& statuses = Field(status, "containerStatuses");
  if (!statuses.is_array() || statuses.empty()) {
    absl::StrAppend(&why, ", no container status yet");
  }
  for (const json& cs : Array(status, "containerStatuses")) {
    const json& state = Field(cs, "state");
    absl::StrAppend(&why, ", container ", Str(cs, "name"));
    if (!Field(state, "waiting").is_null()) {
      absl::StrAppend(&why, " waiting: ", ReasonMessage(Field(state, "waiting")));
    } else if (!Field(state, "running").is_null()) {
      absl::StrAppend(&why, " running since ", Str(Field(state, "running"), "startedAt"),
                      Field(cs, "started") == true
                          ? " but not ready"
                          : " but its startup probe (startup.log) has not passed yet");
    } else if (!Field(state, "terminated").is_null()) {
      absl::StrAppend(&why, " terminated: ", Terminated(Field(state, "terminated")));
      restarted = true;
    }
    const int64_t restarts = Int(cs, "restartCount");
    if (restarts > 0) {
      restarted = true;
      absl::StrAppend(&why, ", ", restarts, " restarts");
      const json& last = Field(Field(cs, "lastState"), "terminated");
      if (!last.is_null()) absl::StrAppend(&why, ", last terminated: ", Terminated(last));
    }
  }
  if (ready_replicas == 1 && PodReady(pod)) {
    absl::StrAppend(&why, ", ready but not yet the only pod counted");
  }

  // The newest Warning event of the pod (FailedMount, FailedCreatePodSandBox, BackOff, ...).
  k8s::ListOptions events;
  events.field_selector = absl::StrCat("involvedObject.kind=Pod,involvedObject.name=", pod_name);
  if (absl::StatusOr<json> ev = env_.client->List(k8s::Event::kResource, env_.ns, events);
      ev.ok()) {
    const json* newest = nullptr;
    std::string newest_time;
    for (const json& e : Array(*ev, "items")) {
      if (Str(e, "type") != "Warning") continue;
      std::string t = Str(e, "lastTimestamp");
      if (t.empty()) t = Str(e, "eventTime");
      if (t.empty()) t = Str(Field(e, "metadata"), "creationTimestamp");
      if (newest == nullptr || t >= newest_time) {
        newest = &e;
        newest_time = t;
      }
    }
    if (newest != nullptr) {
      absl::StrAppend(&why, "; last warning event: ", ReasonMessage(*newest));
    }
  }
  // The end of the log of the container's last run says why the script failed.
  if (restarted) {
    const std::string path =
        absl::StrCat("/api/v1/namespaces/", env_.ns, "/pods/", pod_name,
                     "/log?container=", kContainerName, "&tailLines=5&previous=true");
    if (absl::StatusOr<std::string> log = env_.client->GetRaw(path); log.ok() && !log->empty()) {
      std::vector<absl::string_view> lines = absl::StrSplit(*log, '\n', absl::SkipWhitespace());
      absl::StrAppend(&why, "; last log lines: ", absl::StrJoin(lines, " | "));
    }
  }
  return absl::UnavailableError(why);
}

absl::Status MpsControlDaemon::AssertReady(absl::Time deadline) {
  // Go's wait.Backoff{1s, x2, jitter 1, cap 10s}: the n-th delay lies in [d, 2d], d = 2^n s.
  Backoff backoff({.initial = absl::Milliseconds(1500),
                   .max = absl::Seconds(10),
                   .factor = 2,
                   .jitter = 1.0 / 3});
  absl::Status last;
  int attempt = 0;
  while (true) {
    ++attempt;
    last = CheckReadyOnce();
    if (last.ok()) {
      DRA_INFO("MPS control daemon ready", "claim", group_.claim_uid, "id", id_, "attempts",
               attempt);
      return absl::OkStatus();
    }
    DRA_VLOG(4, "MPS control daemon not ready", "claim", group_.claim_uid, "id", id_, "attempt",
             attempt, "why", last);
    if (attempt >= std::max(env_.ready_attempts, 1)) break;
    const absl::Duration delay = backoff.Next();
    if (env_.clock->Now() + delay > deadline) break;
    env_.clock->SleepFor(delay);
  }
  return absl::Status(
      absl::IsUnavailable(last) ? absl::StatusCode::kUnavailable : last.code(),
      absl::StrCat("MPS control daemon ", env_.ns, "/", DeploymentName(), " not ready after ",
                   attempt, attempt == 1 ? " attempt: " : " attempts: ", last.message()));
}

}  // namespace dra::gpu
