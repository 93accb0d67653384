#include "lib/k8s/objects_apps.h"

#include "lib/common/status.h"
#include "lib/k8s/json_decode.h"

namespace dra::k8s {
namespace {

absl::Status DecodeDaemonSetStatus(const nlohmann::json& j, const std::string& path,
                                   DaemonSetStatus* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.Int32("desiredNumberScheduled", &out->desired_number_scheduled));
  RETURN_IF_ERROR(r.Int32("currentNumberScheduled", &out->current_number_scheduled));
  RETURN_IF_ERROR(r.Int32("numberReady", &out->number_ready));
  RETURN_IF_ERROR(r.Int32("updatedNumberScheduled", &out->updated_number_scheduled));
  RETURN_IF_ERROR(r.Int32("numberAvailable", &out->number_available));
  RETURN_IF_ERROR(r.Int32("numberUnavailable", &out->number_unavailable));
  RETURN_IF_ERROR(r.Int64("observedGeneration", &out->observed_generation));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DaemonSet> DaemonSet::FromJson(const nlohmann::json& j) {
  DaemonSet ds;
  RETURN_IF_ERROR(DecodeTopLevel(j, kResource, &ds.metadata, [&](ObjectReader& r) {
    RETURN_IF_ERROR(r.Raw("spec", &ds.spec));
    return r.Field("status", &ds.status, DecodeDaemonSetStatus);
  }));
  ds.raw = j;
  return ds;
}

nlohmann::json DaemonSet::ToJson() const {
  nlohmann::json out = EncodeTopLevel(raw, kResource, metadata);
  PutRaw(out, "spec", spec);
  // Zero counters are omitted like every empty field (Go writes a few of them as 0, which
  // decodes the same), so an object built in code carries no status at all.
  nlohmann::json status_json = StartObject(status.unknown_fields);
  PutInt64(status_json, "desiredNumberScheduled", status.desired_number_scheduled);
  PutInt64(status_json, "currentNumberScheduled", status.current_number_scheduled);
  PutInt64(status_json, "numberReady", status.number_ready);
  PutInt64(status_json, "updatedNumberScheduled", status.updated_number_scheduled);
  PutInt64(status_json, "numberAvailable", status.number_available);
  PutInt64(status_json, "numberUnavailable", status.number_unavailable);
  PutInt64(status_json, "observedGeneration", status.observed_generation);
  PutObject(out, "status", std::move(status_json));
  return out;
}

}  // namespace dra::k8s
