#include "lib/gpuplugin/timeslicing/time_slicing.h"

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::gpu {

absl::Status TimeSlicing::Apply(const std::vector<std::string>& gpu_uuids,
                                api::TimeSliceInterval interval, const Deadline& deadline) const {
  const std::string value = absl::StrCat(api::TimeSliceIntervalValue(interval));
  for (const std::string& uuid : gpu_uuids) {
    absl::Status s = smi_->Run({"-i", uuid, "-c", "DEFAULT"}, deadline).status();
    if (s.ok()) {
      s = smi_->Run({"compute-policy", "-i", uuid, "--set-timeslice", value}, deadline).status();
    }
    if (!s.ok()) {
      return Annotate(s, absl::StrCat("set time-slice ", api::TimeSliceIntervalName(interval),
                                      " on GPU ", uuid));
    }
    DRA_VLOG(2, "set GPU time-slice", "uuid", uuid, "interval",
             api::TimeSliceIntervalName(interval));
  }
  return absl::OkStatus();
}

absl::Status TimeSlicing::SetInterval(const std::vector<std::string>& gpu_uuids,
                                      api::TimeSliceInterval interval,
                                      const Deadline& deadline) const {
  const std::string value = absl::StrCat(api::TimeSliceIntervalValue(interval));
  for (const std::string& uuid : gpu_uuids) {
    RETURN_IF_ERROR(Annotate(
        smi_->Run({"compute-policy", "-i", uuid, "--set-timeslice", value}, deadline).status(),
        absl::StrCat("set time-slice ", api::TimeSliceIntervalName(interval), " on MIG parent GPU ",
                     uuid)));
    DRA_VLOG(2, "set MIG parent GPU time-slice", "uuid", uuid, "interval",
             api::TimeSliceIntervalName(interval));
  }
  return absl::OkStatus();
}

absl::Status TimeSlicing::Reset(const std::vector<std::string>& gpu_uuids) const {
  return Apply(gpu_uuids, api::TimeSliceInterval::kDefault);
}

}  // namespace dra::gpu
