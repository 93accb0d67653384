// Session::CreateEventSet, Device::SupportedEventTypes and EventSet.

#include <utility>

#include "lib/common/status.h"
#include "lib/nvml/call.h"
#include "lib/nvml/nvml.h"

namespace dra::nvml {
namespace {

using internal::AsDevice;
using internal::Call;

abi::EventSetHandle AsEventSet(void* h) { return static_cast<abi::EventSetHandle>(h); }

}  // namespace

absl::StatusOr<EventSet> Session::CreateEventSet() const {
  RETURN_IF_ERROR(CheckOpen("nvmlEventSetCreate"));
  abi::EventSetHandle handle = nullptr;
  RETURN_IF_ERROR(Call(*library_, library_->api().event_set_create, "nvmlEventSetCreate", &handle));
  return EventSet(library_, handle);
}

absl::StatusOr<uint64_t> Device::SupportedEventTypes() const {
  unsigned long long types = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_supported_event_types,
                       "nvmlDeviceGetSupportedEventTypes", AsDevice(handle_), &types));
  return static_cast<uint64_t>(types);
}

EventSet::EventSet(EventSet&& other) noexcept
    : library_(other.library_), handle_(std::exchange(other.handle_, nullptr)) {}

EventSet& EventSet::operator=(EventSet&& other) noexcept {
  if (this != &other) {
    EventSet old(std::move(*this));  // freed at the end of this scope
    library_ = other.library_;
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

EventSet::~EventSet() {
  if (handle_ != nullptr && library_->api().event_set_free != nullptr) {
    library_->api().event_set_free(AsEventSet(handle_));  // nothing to do about a failure here
  }
}

absl::Status EventSet::Register(const Device& device, uint64_t event_types) const {
  return Call(*library_, library_->api().device_register_events, "nvmlDeviceRegisterEvents",
              AsDevice(device.handle_), static_cast<unsigned long long>(event_types),
              AsEventSet(handle_));
}

absl::StatusOr<Event> EventSet::Wait(unsigned int timeout_ms) const {
  abi::EventData data{};
  RETURN_IF_ERROR(Call(*library_, library_->api().event_set_wait, "nvmlEventSetWait_v2",
                       AsEventSet(handle_), &data, timeout_ms));
  return Event{Device(library_, data.device), data.event_type, data.event_data,
               data.gpu_instance_id, data.compute_instance_id};
}

}  // namespace dra::nvml
