#include "lib/gpuplugin/health/device_health.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/nvml/errors.h"

namespace dra::gpu {
namespace {

using kubeletplugin::HealthStatus;

constexpr uint32_t kNoInstance = 0xffffffff;
constexpr uint64_t kMonitoredEvents = nvml::kEventTypeXidCriticalError |
                                      nvml::kEventTypeDoubleBitEccError |
                                      nvml::kEventTypeSingleBitEccError;

k8s::DeviceTaint MakeTaint(std::string key, std::string value, std::string effect) {
  k8s::DeviceTaint t;
  t.key = std::move(key);
  t.value = std::move(value);
  t.effect = std::move(effect);
  return t;
}

}  // namespace

const std::set<uint64_t>& DefaultIgnoredXids() {
  static const std::set<uint64_t> kIgnored = {13, 31, 43, 45, 68, 109};
  return kIgnored;
}

std::set<uint64_t> ParseAdditionalIgnoredXids(const std::string& value) {
  std::set<uint64_t> xids;
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    uint64_t xid = 0;
    if (!absl::SimpleAtoi(part, &xid) || part.empty() || part[0] == '-' || part[0] == '+') {
      DRA_WARNING("--additional-xids-to-ignore: skipping an entry that is not an unsigned integer",
                  "entry", std::string(part));
      continue;
    }
    xids.insert(xid);
  }
  return xids;
}

DeviceHealthTracker::DeviceHealthTracker(std::string pool, std::vector<std::string> devices,
                                         std::set<uint64_t> additional_ignored_xids,
                                         absl::Duration recovery_quiet_period)
    : pool_(std::move(pool)),
      ignored_xids_([&] {
        std::set<uint64_t> all = DefaultIgnoredXids();
        all.insert(additional_ignored_xids.begin(), additional_ignored_xids.end());
        return all;
      }()),
      quiet_period_(recovery_quiet_period) {
  absl::MutexLock lock(&mu_);
  for (std::string& d : devices) devices_[std::move(d)];
}

namespace {

// Events only make health worse: Healthy, then Unknown, then Unhealthy (only Recover heals).
int Severity(HealthStatus s) {
  switch (s) {
    case HealthStatus::kHealthy:
      return 0;
    case HealthStatus::kUnknown:
      return 1;
    case HealthStatus::kUnhealthy:
      return 2;
  }
  return 1;
}

}  // namespace

bool DeviceHealthTracker::Mark(const std::vector<std::string>& devices,
                               const k8s::DeviceTaint& taint, std::optional<HealthStatus> status,
                               const std::string& message, absl::Time now) {
  absl::MutexLock lock(&mu_);
  bool any = false;
  for (const std::string& d : devices) {
    auto it = devices_.find(d);
    if (it == devices_.end()) continue;
    State& s = it->second;
    bool changed = false;
    auto [t, inserted] = s.taints.try_emplace(taint.key, taint);
    if (!inserted && (t->second.value != taint.value || t->second.effect != taint.effect)) {
      t->second = taint;
      changed = true;
    }
    changed |= inserted;
    if (status == HealthStatus::kUnhealthy) {
      // Every critical event restarts the quiet period, whether or not it changed anything.
      s.last_fault = now;
      if (s.status != HealthStatus::kUnhealthy) s.unhealthy_since = now;
    }
    if (status && Severity(*status) >= Severity(s.status) &&
        (s.status != *status || s.message != message)) {
      s.status = *status;
      s.message = message;
      changed = true;
    }
    if (changed) s.updated = now;
    any |= changed;
  }
  return any;
}

bool DeviceHealthTracker::OnXid(const std::string& device, uint64_t xid, absl::Time now) {
  if (ignored_xids_.contains(xid)) {
    return Mark({device}, MakeTaint(kTaintXid, absl::StrCat(xid), "None"), std::nullopt, "", now);
  }
  return Mark({device}, MakeTaint(kTaintXid, absl::StrCat(xid), "NoSchedule"),
              HealthStatus::kUnhealthy, absl::StrCat("XID ", xid, " (critical) reported by NVML"),
              now);
}

bool DeviceHealthTracker::OnGpuLost(const std::vector<std::string>& devices, absl::Time now) {
  return Mark(devices, MakeTaint(kTaintGpuLost, "", "NoSchedule"), HealthStatus::kUnhealthy,
              "the GPU has fallen off the bus or is otherwise inaccessible (NVML: GPU is lost)",
              now);
}

bool DeviceHealthTracker::OnUnmonitored(const std::vector<std::string>& devices,
                                        const std::string& reason, absl::Time now) {
  return Mark(devices, MakeTaint(kTaintUnmonitored, "", "None"), HealthStatus::kUnknown,
              absl::StrCat("health is not monitored: ", reason), now);
}

bool DeviceHealthTracker::DueLocked(const State& s, absl::Time now) const {
  return quiet_period_ > absl::ZeroDuration() && s.status == HealthStatus::kUnhealthy &&
         s.last_fault != absl::InfinitePast() && now - s.last_fault >= quiet_period_;
}

std::vector<std::string> DeviceHealthTracker::RecoveryDue(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [name, s] : devices_) {
    if (DueLocked(s, now)) out.push_back(name);
  }
  return out;
}

std::optional<absl::Duration> DeviceHealthTracker::Recover(const std::string& device,
                                                           absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = devices_.find(device);
  if (it == devices_.end() || !DueLocked(it->second, now)) return std::nullopt;
  State& s = it->second;
  s.taints.erase(kTaintXid);
  s.taints.erase(kTaintGpuLost);
  // An unmonitored taint would have made the device Unknown-or-worse for good; keep its health
  // at Unknown then rather than claiming a health nobody watches.
  s.status = s.taints.contains(kTaintUnmonitored) ? HealthStatus::kUnknown : HealthStatus::kHealthy;
  s.message = absl::StrCat("recovered: no critical event for ", absl::FormatDuration(quiet_period_),
                           " and NVML answers");
  s.updated = now;
  s.last_fault = absl::InfinitePast();
  absl::Duration unhealthy_for = now - s.unhealthy_since;
  s.unhealthy_since = absl::InfinitePast();
  return unhealthy_for;
}

std::vector<k8s::DeviceTaint> DeviceHealthTracker::Taints(const std::string& device) const {
  absl::MutexLock lock(&mu_);
  std::vector<k8s::DeviceTaint> out;
  auto it = devices_.find(device);
  if (it == devices_.end()) return out;
  for (const auto& [key, taint] : it->second.taints) out.push_back(taint);
  return out;
}

void DeviceHealthTracker::ApplyTaints(std::vector<k8s::Device>& slice_devices) const {
  absl::MutexLock lock(&mu_);
  for (k8s::Device& d : slice_devices) {
    auto it = devices_.find(d.name);
    if (it == devices_.end()) continue;
    for (const auto& [key, taint] : it->second.taints) d.taints.push_back(taint);
  }
}

std::vector<kubeletplugin::DeviceHealth> DeviceHealthTracker::HealthList() const {
  absl::MutexLock lock(&mu_);
  std::vector<kubeletplugin::DeviceHealth> out;
  out.reserve(devices_.size());
  for (const auto& [name, s] : devices_) {
    kubeletplugin::DeviceHealth h;
    h.pool_name = pool_;
    h.device_name = name;
    h.status = s.status;
    h.message = s.message;
    h.last_updated = s.updated == absl::Time() ? absl::Now() : s.updated;
    out.push_back(std::move(h));
  }
  return out;
}

std::map<DevicePlacement, std::string> DevicePlacements(const Inventory& inventory) {
  std::map<DevicePlacement, std::string> out;
  for (const AllocatableDevice& d : inventory.devices) {
    if (d.type == DeviceType::kGpu) {
      out[{d.gpu.uuid, kNoInstance, kNoInstance}] = d.name;
    } else if (d.type == DeviceType::kMig && d.mig) {
      out[{d.mig->parent_uuid, d.mig->gi_id, d.mig->ci_id}] = d.name;
    }
  }
  return out;
}

std::map<DynamicMigPlacement, std::string> DynamicMigPlacements(const Inventory& inventory) {
  std::map<DynamicMigPlacement, std::string> out;
  for (const AllocatableDevice& d : inventory.devices) {
    if (d.type == DeviceType::kMig && d.mig && d.mig->dynamic) {
      out[{d.mig->parent_uuid, d.mig->gi_profile_id, d.mig->placement_start}] = d.name;
    }
  }
  return out;
}

std::vector<std::string> MonitoredDevices(const Inventory& inventory) {
  std::set<std::string> names;
  for (const auto& [placement, name] : DevicePlacements(inventory)) names.insert(name);
  for (const auto& [placement, name] : DynamicMigPlacements(inventory)) names.insert(name);
  return {names.begin(), names.end()};
}

namespace {

absl::Status RegisterGpu(const nvml::Session& session, nvml::EventSet& events,
                         const std::string& uuid) {
  ASSIGN_OR_RETURN(nvml::Device device, session.DeviceByUuid(uuid));
  ASSIGN_OR_RETURN(uint64_t supported, device.SupportedEventTypes());
  if ((supported & kMonitoredEvents) == 0) {
    return absl::UnimplementedError("the GPU reports none of the XID and ECC events");
  }
  return events.Register(device, supported & kMonitoredEvents);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceHealthMonitor>> DeviceHealthMonitor::Start(
    const nvml::Nvml* nvml, const Inventory& inventory, DeviceHealthTracker* tracker,
    OnChange on_change, Options options) {
  std::map<DevicePlacement, std::string> placements = DevicePlacements(inventory);
  std::map<DynamicMigPlacement, std::string> dynamic = DynamicMigPlacements(inventory);
  std::map<std::string, std::vector<std::string>> by_gpu;
  for (const auto& [placement, name] : placements) by_gpu[std::get<0>(placement)].push_back(name);
  for (const auto& [placement, name] : dynamic) by_gpu[std::get<0>(placement)].push_back(name);
  const std::set<std::string> paused =
      options.paused_gpus ? options.paused_gpus() : std::set<std::string>{};

  ASSIGN_OR_RETURN(nvml::Session session, nvml->Open());
  ASSIGN_OR_RETURN(nvml::EventSet events, session.CreateEventSet());
  bool changed = false;
  std::set<std::string> unregistered;
  for (auto it = by_gpu.begin(); it != by_gpu.end();) {
    const std::string& uuid = it->first;
    if (paused.contains(uuid)) {  // on vfio-pci, NVML may not see it: registered once resumed
      unregistered.insert(uuid);
      ++it;
      continue;
    }
    absl::Status s = RegisterGpu(session, events, uuid);
    if (s.ok()) {
      ++it;
      continue;
    }
    DRA_WARNING("GPU health is not monitored", "gpu", uuid, "err", s);
    changed |= tracker->OnUnmonitored(it->second, std::string(s.message()), options.clock->Now());
    it = by_gpu.erase(it);
  }
  std::unique_ptr<DeviceHealthMonitor> monitor(new DeviceHealthMonitor(
      std::move(session), std::move(events), std::move(placements), std::move(dynamic),
      std::move(by_gpu), tracker, std::move(on_change), options));
  monitor->unregistered_ = std::move(unregistered);
  monitor->last_paused_ = paused;
  if (changed && monitor->on_change_) monitor->on_change_();
  monitor->thread_ = std::thread([m = monitor.get()] { m->Loop(); });
  return monitor;
}

DeviceHealthMonitor::DeviceHealthMonitor(
    nvml::Session session, nvml::EventSet events, std::map<DevicePlacement, std::string> placements,
    std::map<DynamicMigPlacement, std::string> dynamic,
    std::map<std::string, std::vector<std::string>> devices_by_gpu, DeviceHealthTracker* tracker,
    OnChange on_change, Options options)
    : session_(std::move(session)),
      events_(std::move(events)),
      placements_(std::move(placements)),
      dynamic_(std::move(dynamic)),
      devices_by_gpu_(std::move(devices_by_gpu)),
      tracker_(tracker),
      on_change_(std::move(on_change)),
      options_(std::move(options)) {}

DeviceHealthMonitor::~DeviceHealthMonitor() { Stop(); }

void DeviceHealthMonitor::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

std::vector<std::string> DeviceHealthMonitor::AllDevices() const {
  std::vector<std::string> all;
  for (const auto& [gpu, names] : devices_by_gpu_)
    all.insert(all.end(), names.begin(), names.end());
  return all;
}

std::set<std::string> DeviceHealthMonitor::Paused() const {
  return options_.paused_gpus ? options_.paused_gpus() : std::set<std::string>{};
}

bool DeviceHealthMonitor::RegisterResumed(const std::set<std::string>& paused) {
  bool changed = false;
  for (const std::string& uuid : last_paused_) {
    if (paused.contains(uuid) || !devices_by_gpu_.contains(uuid)) continue;
    // Back from vfio-pci: its events again (a registration from before the bind may be stale).
    absl::Status s = RegisterGpu(session_, events_, uuid);
    const bool never_registered = unregistered_.erase(uuid) > 0;
    if (s.ok()) {
      DRA_INFO("device health: watching the GPU again", "gpu", uuid);
    } else if (never_registered) {
      DRA_WARNING("GPU health is not monitored", "gpu", uuid, "err", s);
      changed |= tracker_->OnUnmonitored(devices_by_gpu_.at(uuid), std::string(s.message()),
                                         options_.clock->Now());
    } else {
      DRA_WARNING(
          "device health: registering the GPU's events again failed; keeping the earlier "
          "registration",
          "gpu", uuid, "err", s);
    }
  }
  for (const std::string& uuid : paused) {
    if (!last_paused_.contains(uuid) && devices_by_gpu_.contains(uuid)) {
      DRA_INFO("device health: not watching the GPU while it is bound to vfio-pci", "gpu", uuid);
    }
  }
  last_paused_ = paused;
  return changed;
}

std::string DeviceHealthMonitor::DeviceOfEvent(const std::string& uuid, uint32_t gi,
                                               uint32_t ci) const {
  if (auto it = placements_.find({uuid, gi, ci}); it != placements_.end()) return it->second;
  if (dynamic_.empty() || gi == kNoInstance) return "";
  absl::StatusOr<nvml::GpuInstanceInfo> info = [&]() -> absl::StatusOr<nvml::GpuInstanceInfo> {
    ASSIGN_OR_RETURN(nvml::Device gpu, session_.DeviceByUuid(uuid));
    ASSIGN_OR_RETURN(nvml::GpuInstance instance, gpu.GpuInstanceById(gi));
    return instance.Info();
  }();
  if (!info.ok()) {
    DRA_VLOG(4, "device health: the event's GPU instance is not readable", "gpu", uuid, "gi", gi,
             "err", info.status());
    return "";
  }
  auto it = dynamic_.find({uuid, info->profile_id, info->placement.start});
  return it == dynamic_.end() ? "" : it->second;
}

std::vector<std::string> DeviceHealthMonitor::LostDevices(
    const std::set<std::string>& paused) const {
  std::vector<std::string> out;
  for (const auto& [uuid, names] : devices_by_gpu_) {
    if (paused.contains(uuid)) continue;
    if (!paused.empty()) {
      absl::Status s = [this](const std::string& gpu_uuid) -> absl::Status {
        ASSIGN_OR_RETURN(nvml::Device gpu, session_.DeviceByUuid(gpu_uuid));
        return gpu.Memory().status();
      }(uuid);
      if (s.ok()) continue;
    }
    out.insert(out.end(), names.begin(), names.end());
  }
  return out;
}

void DeviceHealthMonitor::Loop() {
  if (devices_by_gpu_.empty()) {
    DRA_INFO("device health: no GPU to monitor");
    return;
  }
  DRA_INFO("device health monitoring started", "gpus", devices_by_gpu_.size());
  const auto timeout_ms =
      static_cast<unsigned int>(absl::ToInt64Milliseconds(options_.wait_timeout));
  while (!stop_.HasBeenNotified()) {
    // Before every wait, so also after one that timed out: at most wait_timeout late.
    if (RegisterResumed(Paused()) && on_change_) on_change_();
    CheckRecovery(last_paused_);
    absl::StatusOr<nvml::Event> event = events_.Wait(timeout_ms);
    bool changed = false;
    // Asked again: a GPU may have gone to vfio-pci during the wait.
    const std::set<std::string> paused = Paused();
    if (!event.ok()) {
      if (nvml::IsNvmlError(event.status(), nvml::ReturnCode::kTimeout)) continue;
      if (nvml::IsNvmlError(event.status(), nvml::ReturnCode::kGpuIsLost)) {
        DRA_WARNING("device health: a GPU is lost; marking every device of a GPU that fails", "err",
                    event.status(), "pausedGpus", paused.size());
        changed = tracker_->OnGpuLost(LostDevices(paused), options_.clock->Now());
      } else {
        // Other errors are transient as far as anyone knows; do not spin on them.
        DRA_VLOG(4, "device health: event wait failed", "err", event.status());
        stop_.WaitForNotificationWithTimeout(absl::Milliseconds(100));
      }
    } else if ((event->type & nvml::kEventTypeXidCriticalError) == 0) {
      DRA_VLOG(4, "device health: ignoring a non-XID event", "type", event->type);
    } else if (absl::StatusOr<std::string> uuid = event->device.Uuid(); !uuid.ok()) {
      DRA_WARNING("device health: the event's GPU has no UUID; treating every GPU as lost", "err",
                  uuid.status());
      changed = tracker_->OnGpuLost(AllDevices(), options_.clock->Now());
    } else if (paused.contains(*uuid)) {
      DRA_VLOG(2, "device health: ignoring an event of a GPU bound to vfio-pci", "gpu", *uuid,
               "xid", event->data);
    } else if (const std::string device =
                   DeviceOfEvent(*uuid, event->gpu_instance_id, event->compute_instance_id);
               device.empty()) {
      DRA_VLOG(4, "device health: event for no published device", "gpu", *uuid, "gi",
               event->gpu_instance_id, "ci", event->compute_instance_id, "xid", event->data);
    } else {
      DRA_WARNING("device health: XID event", "device", device, "gpu", *uuid, "xid", event->data);
      changed = tracker_->OnXid(device, event->data, options_.clock->Now());
    }
    if (changed && on_change_) on_change_();
  }
}

absl::Status DeviceHealthMonitor::Probe(const std::string& device) const {
  if (options_.probe) return options_.probe(device);
  for (const auto& [uuid, names] : devices_by_gpu_) {
    if (std::find(names.begin(), names.end(), device) == names.end()) continue;
    ASSIGN_OR_RETURN(nvml::Device gpu, session_.DeviceByUuid(uuid));
    ASSIGN_OR_RETURN(std::string got, gpu.Uuid());
    if (got != uuid) {
      return absl::InternalError(absl::StrCat("NVML answers UUID ", got, " for GPU ", uuid));
    }
    return gpu.Memory().status();
  }
  return absl::NotFoundError(absl::StrCat("device ", device, " is not monitored"));
}

void DeviceHealthMonitor::CheckRecovery(const std::set<std::string>& paused) {
  for (const std::string& device : tracker_->RecoveryDue(options_.clock->Now())) {
    const bool on_paused_gpu = std::any_of(paused.begin(), paused.end(), [&](const auto& uuid) {
      auto it = devices_by_gpu_.find(uuid);
      return it != devices_by_gpu_.end() &&
             std::find(it->second.begin(), it->second.end(), device) != it->second.end();
    });
    if (on_paused_gpu) continue;  // recovered once it is back and answers
    if (absl::Status s = Probe(device); !s.ok()) {
      DRA_VLOG(2, "device health: recovery check failed; the device stays unhealthy", "device",
               device, "err", s);
      continue;
    }
    std::optional<absl::Duration> was = tracker_->Recover(device, options_.clock->Now());
    if (!was) continue;  // a new fault came while probing
    DRA_INFO("device health: device recovered; taint removed, reported healthy", "device", device,
             "unhealthyFor", absl::FormatDuration(*was));
    if (on_change_) on_change_();
    if (options_.on_recovered) options_.on_recovered(device, *was);
  }
}

}  // namespace dra::gpu
