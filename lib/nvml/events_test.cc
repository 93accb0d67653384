// Events through the facade: an XID injected by another process (the fake nvidia-smi's mock-only
// flag) reaches Wait on a registered GPU; otherwise Wait times out.

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/nvml/nvml.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::nvml {
namespace {

TEST(NvmlEventsTest, InjectedXidIsDelivered) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::MakeMockDriverRoot("gb200-4x", dir.path()).ok());
  auto nvml = Nvml::Create(dir.path());
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  auto session = (*nvml)->Open();
  ASSERT_TRUE(session.ok()) << session.status();
  Device gpu = *session->DeviceByIndex(2);
  absl::StatusOr<uint64_t> supported = gpu.SupportedEventTypes();
  ASSERT_TRUE(supported.ok()) << supported.status();
  EXPECT_NE(*supported & kEventTypeXidCriticalError, 0u);

  absl::StatusOr<EventSet> events = session->CreateEventSet();
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_TRUE(events->Register(gpu, kEventTypeXidCriticalError).ok());

  absl::StatusOr<Event> none = events->Wait(20);
  EXPECT_TRUE(IsNvmlError(none.status(), ReturnCode::kTimeout)) << none.status();
  EXPECT_EQ(none.status().code(), absl::StatusCode::kDeadlineExceeded);

  auto inject = testing::RunCommand(
      {dir.path() + "/usr/bin/nvidia-smi", "--mock-inject-xid", *gpu.Uuid(), "48"});
  ASSERT_TRUE(inject.ok());
  ASSERT_EQ(inject->exit_code, 0) << inject->output;
  absl::StatusOr<Event> event = events->Wait(2000);
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->device, gpu);
  EXPECT_EQ(event->type, kEventTypeXidCriticalError);
  EXPECT_EQ(event->data, 48u);
  EXPECT_EQ(event->gpu_instance_id, 0xffffffffu);

  EventSet moved = *std::move(events);  // the set survives a move and is freed once
  EXPECT_TRUE(IsNvmlError(moved.Wait(10).status(), ReturnCode::kTimeout));
}

}  // namespace
}  // namespace dra::nvml
