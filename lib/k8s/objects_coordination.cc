#include "lib/k8s/objects_coordination.h"

#include "lib/common/status.h"
#include "lib/k8s/json_decode.h"

namespace dra::k8s {
namespace {

absl::Status DecodeLeaseSpec(const nlohmann::json& j, const std::string& path, LeaseSpec* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.OptionalString("holderIdentity", &out->holder_identity));
  RETURN_IF_ERROR(r.OptionalInt32("leaseDurationSeconds", &out->lease_duration_seconds));
  RETURN_IF_ERROR(r.OptionalString("acquireTime", &out->acquire_time));
  RETURN_IF_ERROR(r.OptionalString("renewTime", &out->renew_time));
  RETURN_IF_ERROR(r.OptionalInt32("leaseTransitions", &out->lease_transitions));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

std::optional<int64_t> Widen(const std::optional<int32_t>& v) {
  if (!v.has_value()) return std::nullopt;
  return *v;
}

}  // namespace

absl::StatusOr<Lease> Lease::FromJson(const nlohmann::json& j) {
  Lease lease;
  RETURN_IF_ERROR(DecodeTopLevel(j, kResource, &lease.metadata, [&](ObjectReader& r) {
    return r.Field("spec", &lease.spec, DecodeLeaseSpec);
  }));
  lease.raw = j;
  return lease;
}

nlohmann::json Lease::ToJson() const {
  nlohmann::json out = EncodeTopLevel(raw, kResource, metadata);
  nlohmann::json spec_json = StartObject(spec.unknown_fields);
  PutOptionalString(spec_json, "holderIdentity", spec.holder_identity);
  PutOptionalInt64(spec_json, "leaseDurationSeconds", Widen(spec.lease_duration_seconds));
  PutOptionalString(spec_json, "acquireTime", spec.acquire_time);
  PutOptionalString(spec_json, "renewTime", spec.renew_time);
  PutOptionalInt64(spec_json, "leaseTransitions", Widen(spec.lease_transitions));
  out["spec"] = std::move(spec_json);
  return out;
}

}  // namespace dra::k8s
