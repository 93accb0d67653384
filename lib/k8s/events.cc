#include "lib/k8s/events.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dra::k8s {

absl::Status PostEvent(Client* client, const EventTarget& target, const std::string& type,
                       const std::string& reason, const std::string& message,
                       const std::string& component, const std::string& host) {
  Event e;
  e.metadata.namespace_name = target.namespace_name.empty() ? "default" : target.namespace_name;
  e.metadata.generate_name = absl::AsciiStrToLower(absl::StrCat(target.name, "."));
  e.involved_object.api_version = target.api_version;
  e.involved_object.kind = target.kind;
  e.involved_object.name = target.name;
  e.involved_object.namespace_name = target.namespace_name;
  e.involved_object.uid = target.uid;
  e.reason = reason;
  e.message = message.size() > 1024 ? message.substr(0, 1021) + "..." : message;
  e.type = type;
  e.source.component = component;
  e.source.host = host;
  e.reporting_component = component;
  e.reporting_instance = host;
  std::string now = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  e.first_timestamp = now;
  e.last_timestamp = now;
  e.count = 1;
  return client->Create(Event::kResource, e.metadata.namespace_name, e.ToJson()).status();
}

}  // namespace dra::k8s
