// The mock libnvidia-ml.so.1 through its raw C ABI, for the semantics the facade tests do not
// reach: init reference counting, argument checks, versioned structs, events, broken profiles and
// state files, the MOCK_NVML_ROOT override and concurrent callers.

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/nvml/nvml_abi.h"
#include "nlohmann/json.hpp"
#include "test/doubles/mock-nvml/mock_nvml_ext.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace {

namespace abi = dra::nvml::abi;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The mock loaded from a driver root; each root is a separate file, so a separate library
// instance with its own init count.
class Raw {
 public:
  explicit Raw(const std::string& path) : handle_(::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {}
  ~Raw() {
    if (handle_ != nullptr) ::dlclose(handle_);
  }
  bool Loaded() const { return handle_ != nullptr; }
  template <typename Fn>
  Fn* Get(const char* name) {
    return reinterpret_cast<Fn*>(::dlsym(handle_, name));
  }
  std::string LastError() { return Get<mock_nvml::MockNvmlLastErrorFn>("mockNvmlLastError")(); }

 private:
  void* handle_;
};

class MockNvmlTest : public ::testing::Test {
 protected:
  void Make(const std::string& profile) {
    ASSERT_TRUE(dra::testing::MakeMockDriverRoot(profile, dir_.path()).ok());
    raw_ = std::make_unique<Raw>(LibraryPath());
    ASSERT_TRUE(raw_->Loaded()) << ::dlerror();
    init_ = raw_->Get<abi::InitWithFlagsFn>("nvmlInitWithFlags");
    shutdown_ = raw_->Get<abi::ShutdownFn>("nvmlShutdown");
    handle_by_index_ = raw_->Get<abi::DeviceGetHandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2");
  }
  std::string LibraryPath() const {
    return dir_.path() + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1";
  }
  abi::DeviceHandle Gpu(unsigned int index) {
    abi::DeviceHandle h = nullptr;
    EXPECT_EQ(handle_by_index_(index, &h), abi::kSuccess);
    return h;
  }

  dra::testing::TempDir dir_;
  std::unique_ptr<Raw> raw_;
  abi::InitWithFlagsFn* init_ = nullptr;
  abi::ShutdownFn* shutdown_ = nullptr;
  abi::DeviceGetHandleByIndexFn* handle_by_index_ = nullptr;
};

TEST_F(MockNvmlTest, InitIsReferenceCounted) {
  Make("t4-2x");
  auto count = raw_->Get<abi::DeviceGetCountFn>("nvmlDeviceGetCount_v2");
  auto init_v1 = raw_->Get<abi::InitV2Fn>("nvmlInit");
  unsigned int n = 0;
  EXPECT_EQ(shutdown_(), abi::kErrorUninitialized);
  EXPECT_EQ(count(&n), abi::kErrorUninitialized);
  ASSERT_EQ(init_(0), abi::kSuccess);
  ASSERT_EQ(init_v1(), abi::kSuccess);
  EXPECT_EQ(shutdown_(), abi::kSuccess);
  EXPECT_EQ(count(&n), abi::kSuccess);  // one reference left
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(shutdown_(), abi::kSuccess);
  EXPECT_EQ(count(&n), abi::kErrorUninitialized);
  EXPECT_EQ(shutdown_(), abi::kErrorUninitialized);
}

TEST_F(MockNvmlTest, ErrorStrings) {
  Make("t4-2x");
  auto text = raw_->Get<abi::ErrorStringFn>("nvmlErrorString");
  EXPECT_STREQ(text(abi::kSuccess), "Success");
  EXPECT_STREQ(text(abi::kErrorNotSupported), "Not Supported");
  EXPECT_STREQ(text(abi::kErrorInUse), "In use by another client");
  EXPECT_STREQ(text(12345), "Unknown Error");
}

TEST_F(MockNvmlTest, ArgumentChecks) {
  Make("a100-mig-4x");
  ASSERT_EQ(init_(abi::kInitFlagNoGpus), abi::kSuccess);
  auto name = raw_->Get<abi::DeviceGetStringFn>("nvmlDeviceGetName");
  char small[4];
  EXPECT_EQ(name(Gpu(0), small, sizeof(small)), abi::kErrorInsufficientSize);
  int not_a_handle = 0;
  char buffer[96];
  EXPECT_EQ(name(reinterpret_cast<abi::DeviceHandle>(&not_a_handle), buffer, sizeof(buffer)),
            abi::kErrorInvalidArgument);
  EXPECT_EQ(name(Gpu(0), nullptr, 0), abi::kErrorInvalidArgument);

  auto placements = raw_->Get<abi::DeviceGetGpuInstancePossiblePlacementsFn>(
      "nvmlDeviceGetGpuInstancePossiblePlacements_v2");
  unsigned int count = 0;
  ASSERT_EQ(placements(Gpu(0), 19, nullptr, &count), abi::kSuccess);
  EXPECT_EQ(count, 7u);
  abi::GpuInstancePlacement two[2];
  count = 2;
  EXPECT_EQ(placements(Gpu(0), 19, two, &count), abi::kErrorInsufficientSize);
  EXPECT_EQ(count, 7u);
  EXPECT_EQ(placements(Gpu(0), 77, nullptr, &count), abi::kErrorInvalidArgument);
  EXPECT_EQ(shutdown_(), abi::kSuccess);
}

TEST_F(MockNvmlTest, VersionedStructs) {
  Make("gb200-4x");
  ASSERT_EQ(init_(abi::kInitFlagNoGpus), abi::kSuccess);
  auto memory_v2 = raw_->Get<abi::DeviceGetMemoryInfoV2Fn>("nvmlDeviceGetMemoryInfo_v2");
  abi::MemoryV2 memory{};
  EXPECT_EQ(memory_v2(Gpu(0), &memory), abi::kErrorArgumentVersionMismatch);
  memory.version = abi::kMemoryV2Version;
  ASSERT_EQ(memory_v2(Gpu(0), &memory), abi::kSuccess);
  EXPECT_EQ(memory.total, 189471ull << 20);
  EXPECT_EQ(memory.reserved, 1024ull << 20);
  EXPECT_EQ(memory.used, memory.reserved);

  auto fabric_v = raw_->Get<abi::DeviceGetGpuFabricInfoVFn>("nvmlDeviceGetGpuFabricInfoV");
  abi::GpuFabricInfoV2 v2{};
  v2.version = abi::kGpuFabricInfoV2Version;
  ASSERT_EQ(fabric_v(Gpu(1), reinterpret_cast<abi::GpuFabricInfoV3*>(&v2)), abi::kSuccess);
  EXPECT_EQ(v2.clique_id, 7u);
  EXPECT_EQ(v2.state, abi::kGpuFabricStateCompleted);
  abi::GpuFabricInfoV3 bogus{};
  bogus.version = 42;
  EXPECT_EQ(fabric_v(Gpu(1), &bogus), abi::kErrorArgumentVersionMismatch);

  auto profile_v =
      raw_->Get<abi::DeviceGetGpuInstanceProfileInfoVFn>("nvmlDeviceGetGpuInstanceProfileInfoV");
  abi::GpuInstanceProfileInfoV2 profile{};
  EXPECT_EQ(profile_v(Gpu(0), 0, &profile), abi::kErrorArgumentVersionMismatch);
  profile.version = abi::kGpuInstanceProfileInfoV2Version;
  ASSERT_EQ(profile_v(Gpu(0), 0, &profile), abi::kSuccess);
  EXPECT_STREQ(profile.name, "MIG 1g.23gb");
  EXPECT_EQ(shutdown_(), abi::kSuccess);
}

TEST_F(MockNvmlTest, ComputeInstanceInfoDeviceByVersion) {
  Make("a100-mig-4x");
  ASSERT_EQ(init_(abi::kInitFlagNoGpus), abi::kSuccess);
  auto gi_by_id = raw_->Get<abi::DeviceGetGpuInstanceByIdFn>("nvmlDeviceGetGpuInstanceById");
  auto ci_by_id =
      raw_->Get<abi::GpuInstanceGetComputeInstanceByIdFn>("nvmlGpuInstanceGetComputeInstanceById");
  auto info_v1 = raw_->Get<abi::ComputeInstanceGetInfoFn>("nvmlComputeInstanceGetInfo");
  auto info_v2 = raw_->Get<abi::ComputeInstanceGetInfoFn>("nvmlComputeInstanceGetInfo_v2");
  auto is_mig = raw_->Get<abi::DeviceGetUintFn>("nvmlDeviceIsMigDeviceHandle");
  abi::GpuInstanceHandle gi = nullptr;
  abi::ComputeInstanceHandle ci = nullptr;
  ASSERT_EQ(gi_by_id(Gpu(0), 1, &gi), abi::kSuccess);
  ASSERT_EQ(ci_by_id(gi, 0, &ci), abi::kSuccess);
  abi::ComputeInstanceInfo info{};
  ASSERT_EQ(info_v1(ci, &info), abi::kSuccess);
  EXPECT_EQ(info.device, Gpu(0));
  ASSERT_EQ(info_v2(ci, &info), abi::kSuccess);
  unsigned int mig = 0;
  ASSERT_EQ(is_mig(info.device, &mig), abi::kSuccess);
  EXPECT_EQ(mig, 1u);
  EXPECT_EQ(info.gpu_instance, gi);
  EXPECT_EQ(ci_by_id(gi, 5, &ci), abi::kErrorNotFound);
  EXPECT_EQ(shutdown_(), abi::kSuccess);
}

TEST_F(MockNvmlTest, InjectedXidReachesEventWaiters) {
  Make("h100-8x");
  ASSERT_EQ(init_(abi::kInitFlagNoGpus), abi::kSuccess);
  auto create = raw_->Get<abi::EventSetCreateFn>("nvmlEventSetCreate");
  auto supported =
      raw_->Get<abi::DeviceGetSupportedEventTypesFn>("nvmlDeviceGetSupportedEventTypes");
  auto reg = raw_->Get<abi::DeviceRegisterEventsFn>("nvmlDeviceRegisterEvents");
  auto wait = raw_->Get<abi::EventSetWaitFn>("nvmlEventSetWait_v2");
  auto free_set = raw_->Get<abi::EventSetFreeFn>("nvmlEventSetFree");
  auto inject = raw_->Get<mock_nvml::MockNvmlInjectEventFn>("mockNvmlInjectEvent");
  auto uuid = raw_->Get<abi::DeviceGetStringFn>("nvmlDeviceGetUUID");
  char gpu0[96], gpu1[96];
  ASSERT_EQ(uuid(Gpu(0), gpu0, sizeof(gpu0)), abi::kSuccess);
  ASSERT_EQ(uuid(Gpu(1), gpu1, sizeof(gpu1)), abi::kSuccess);

  ASSERT_EQ(inject(gpu0, abi::kEventTypeXidCriticalError, 13, 0xffffffff, 0xffffffff),
            abi::kSuccess);  // before the set exists: never delivered
  abi::EventSetHandle set = nullptr;
  ASSERT_EQ(create(&set), abi::kSuccess);
  unsigned long long types = 0;
  ASSERT_EQ(supported(Gpu(0), &types), abi::kSuccess);
  EXPECT_NE(types & abi::kEventTypeXidCriticalError, 0u);
  ASSERT_EQ(reg(Gpu(0), abi::kEventTypeXidCriticalError, set), abi::kSuccess);

  abi::EventData data{};
  EXPECT_EQ(wait(set, &data, 30), abi::kErrorTimeout);
  ASSERT_EQ(inject(gpu1, abi::kEventTypeXidCriticalError, 31, 0xffffffff, 0xffffffff),
            abi::kSuccess);  // a GPU not registered: skipped
  // Another process injects through the fake nvidia-smi.
  auto smi = dra::testing::RunCommand(
      {dir_.path() + "/usr/bin/nvidia-smi", "--mock-inject-xid", gpu0, "79"});
  ASSERT_TRUE(smi.ok());
  ASSERT_EQ(smi->exit_code, 0) << smi->output;
  ASSERT_EQ(wait(set, &data, 2000), abi::kSuccess);
  EXPECT_EQ(data.device, Gpu(0));
  EXPECT_EQ(data.event_type, abi::kEventTypeXidCriticalError);
  EXPECT_EQ(data.event_data, 79u);
  EXPECT_EQ(data.gpu_instance_id, 0xffffffffu);
  // With a GPU and a compute instance: an event of that MIG device.
  smi = dra::testing::RunCommand(
      {dir_.path() + "/usr/bin/nvidia-smi", "--mock-inject-xid", gpu0, "48", "3", "0"});
  ASSERT_TRUE(smi.ok());
  ASSERT_EQ(smi->exit_code, 0) << smi->output;
  ASSERT_EQ(wait(set, &data, 2000), abi::kSuccess);
  EXPECT_EQ(data.event_data, 48u);
  EXPECT_EQ(data.gpu_instance_id, 3u);
  EXPECT_EQ(data.compute_instance_id, 0u);
  EXPECT_EQ(wait(set, &data, 30), abi::kErrorTimeout);
  EXPECT_EQ(free_set(set), abi::kSuccess);
  EXPECT_EQ(free_set(set), abi::kErrorInvalidArgument);
  EXPECT_EQ(shutdown_(), abi::kSuccess);
}

TEST_F(MockNvmlTest, BrokenProfileFailsInitWithTheReason) {
  Make("t4-2x");
  std::ofstream(dir_.path() + "/var/lib/mock-nvml/profile.json")
      << R"({"driver_version": "1.2.3", "cuda_driver_version": 12000, "gpus": [{"name": "x"}]})";
  EXPECT_EQ(init_(0), abi::kErrorDriverNotLoaded);
  EXPECT_THAT(raw_->LastError(), HasSubstr("gpus[0]: missing field \"uuid\""));
  std::filesystem::remove(dir_.path() + "/var/lib/mock-nvml/profile.json");
  EXPECT_EQ(init_(0), abi::kErrorDriverNotLoaded);
  EXPECT_THAT(raw_->LastError(), StartsWith("cannot read profile "));
}

TEST_F(MockNvmlTest, OverlappingInitialInstancesAreRejected) {
  Make("a100-mig-4x");
  std::ifstream in(dra::testing::ProfilePath("a100-mig-4x"));
  nlohmann::json profile = nlohmann::json::parse(in);
  profile["gpus"][3]["mig"]["instances"] =
      nlohmann::json::parse(R"([{"profile": "7g.40gb", "placement": 0},
                                {"profile": "1g.5gb", "placement": 3}])");
  std::ofstream(dir_.path() + "/var/lib/mock-nvml/profile.json") << profile.dump();
  EXPECT_EQ(init_(0), abi::kErrorDriverNotLoaded);
  EXPECT_THAT(raw_->LastError(), HasSubstr("gpus[3].mig.instances: instance 1 cannot be created"));
}

TEST_F(MockNvmlTest, CorruptStateIsAnUnknownError) {
  Make("a100-mig-4x");
  ASSERT_EQ(init_(0), abi::kSuccess);
  std::ofstream(dir_.path() + "/var/lib/mock-nvml/state.json") << "{not json";
  auto mig_mode = raw_->Get<abi::DeviceGetMigModeFn>("nvmlDeviceGetMigMode");
  unsigned int current = 0, pending = 0;
  EXPECT_EQ(mig_mode(Gpu(0), &current, &pending), abi::kErrorUnknown);
  EXPECT_THAT(raw_->LastError(), StartsWith("corrupt " + dir_.path()));
  EXPECT_EQ(shutdown_(), abi::kSuccess);
}

TEST_F(MockNvmlTest, RootFromEnvironment) {
  Make("t4-2x");
  // The build-tree library has no driver root around it; MOCK_NVML_ROOT names one.
  Raw build(dra::testing::MockNvmlLibraryPath());
  ASSERT_TRUE(build.Loaded());
  ::setenv("MOCK_NVML_ROOT", dir_.path().c_str(), 1);
  const abi::Return ret = build.Get<abi::InitWithFlagsFn>("nvmlInitWithFlags")(0);
  ::unsetenv("MOCK_NVML_ROOT");
  ASSERT_EQ(ret, abi::kSuccess) << build.LastError();
  unsigned int n = 0;
  EXPECT_EQ(build.Get<abi::DeviceGetCountFn>("nvmlDeviceGetCount_v2")(&n), abi::kSuccess);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(build.Get<abi::ShutdownFn>("nvmlShutdown")(), abi::kSuccess);
}

TEST_F(MockNvmlTest, ConcurrentCallers) {
  Make("a100-mig-4x");
  ASSERT_EQ(init_(0), abi::kSuccess);
  auto name = raw_->Get<abi::DeviceGetStringFn>("nvmlDeviceGetName");
  auto mig_mode = raw_->Get<abi::DeviceGetMigModeFn>("nvmlDeviceGetMigMode");
  std::vector<std::thread> threads;
  threads.reserve(8);
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        abi::DeviceHandle gpu = nullptr;
        char text[96];
        unsigned int current = 0, pending = 0;
        if (handle_by_index_(static_cast<unsigned int>(t % 4), &gpu) != abi::kSuccess ||
            name(gpu, text, sizeof(text)) != abi::kSuccess ||
            mig_mode(gpu, &current, &pending) != abi::kSuccess) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(shutdown_(), abi::kSuccess);
}

// Per-GPU failures of the degraded-hardware profiles: a lost GPU still has a handle by index and
// PCI bus id, but every query on it answers GPU_IS_LOST; the other GPUs answer as usual.
TEST_F(MockNvmlTest, LostGpuAnswersGpuIsLostOnlyForItself) {
  Make("h100-4x-gpu-lost");
  ASSERT_EQ(init_(0), abi::kSuccess);
  auto minor = raw_->Get<abi::DeviceGetUintFn>("nvmlDeviceGetMinorNumber");
  auto name = raw_->Get<abi::DeviceGetStringFn>("nvmlDeviceGetName");
  auto memory = raw_->Get<abi::DeviceGetMemoryInfoFn>("nvmlDeviceGetMemoryInfo");
  auto events = raw_->Get<abi::DeviceGetSupportedEventTypesFn>("nvmlDeviceGetSupportedEventTypes");
  auto by_uuid = raw_->Get<abi::DeviceGetHandleByStringFn>("nvmlDeviceGetHandleByUUID");
  auto by_pci = raw_->Get<abi::DeviceGetHandleByStringFn>("nvmlDeviceGetHandleByPciBusId_v2");
  unsigned int value = 0;
  char text[96];
  abi::Memory mem{};
  unsigned long long types = 0;
  abi::DeviceHandle h = nullptr;
  EXPECT_EQ(minor(Gpu(2), &value), abi::kErrorGpuIsLost);
  EXPECT_EQ(name(Gpu(2), text, sizeof(text)), abi::kErrorGpuIsLost);
  EXPECT_EQ(memory(Gpu(2), &mem), abi::kErrorGpuIsLost);
  EXPECT_EQ(events(Gpu(2), &types), abi::kErrorGpuIsLost);
  EXPECT_EQ(by_uuid("GPU-c94a0b7e-1f2d-4e68-a53b-7d0e9f1c2a84", &h), abi::kErrorGpuIsLost);
  EXPECT_EQ(by_pci("0000:3a:00.0", &h), abi::kSuccess);
  EXPECT_EQ(h, Gpu(2));
  EXPECT_EQ(minor(Gpu(3), &value), abi::kSuccess);
  EXPECT_EQ(value, 3u);
  EXPECT_EQ(memory(Gpu(3), &mem), abi::kSuccess);
  EXPECT_EQ(shutdown_(), abi::kSuccess);
}

TEST_F(MockNvmlTest, PerGpuForcedErrors) {
  Make("gb10-1x");
  ASSERT_EQ(init_(0), abi::kSuccess);
  auto memory = raw_->Get<abi::DeviceGetMemoryInfoFn>("nvmlDeviceGetMemoryInfo");
  auto minor = raw_->Get<abi::DeviceGetUintFn>("nvmlDeviceGetMinorNumber");
  abi::Memory mem{};
  unsigned int value = 7;
  EXPECT_EQ(memory(Gpu(0), &mem), abi::kErrorNotSupported);
  EXPECT_EQ(minor(Gpu(0), &value), abi::kSuccess);
  EXPECT_EQ(value, 0u);
  EXPECT_EQ(shutdown_(), abi::kSuccess);
}

TEST_F(MockNvmlTest, RawArchitectureAndBrandValues) {
  Make("future-arch-2x");
  ASSERT_EQ(init_(0), abi::kSuccess);
  unsigned int value = 0;
  auto arch = raw_->Get<abi::DeviceGetUintFn>("nvmlDeviceGetArchitecture");
  auto brand = raw_->Get<abi::DeviceGetIntFn>("nvmlDeviceGetBrand");
  int b = 0;
  EXPECT_EQ(arch(Gpu(0), &value), abi::kSuccess);
  EXPECT_EQ(value, 99u);
  EXPECT_EQ(brand(Gpu(0), &b), abi::kSuccess);
  EXPECT_EQ(b, 99);
  EXPECT_EQ(arch(Gpu(1), &value), abi::kSuccess);
  EXPECT_EQ(value, abi::kArchRubin);
  EXPECT_EQ(shutdown_(), abi::kSuccess);
}

// What dynamic MIG needs of the mock, through the raw ABI on an H100 (MIG off, switches without a
// reset): possible placements, creation at a placement
// (a start that is not a possible placement, an overlap), "in use" on destroy and on disabling MIG
// while instances exist, and SetMigMode's activation status.
TEST_F(MockNvmlTest, DynamicMigCalls) {
  Make("h100-8x");
  ASSERT_EQ(init_(0), abi::kSuccess);
  auto get_mode = raw_->Get<abi::DeviceGetMigModeFn>("nvmlDeviceGetMigMode");
  auto set_mode = raw_->Get<abi::DeviceSetMigModeFn>("nvmlDeviceSetMigMode");
  auto placements = raw_->Get<abi::DeviceGetGpuInstancePossiblePlacementsFn>(
      "nvmlDeviceGetGpuInstancePossiblePlacements_v2");
  auto create_gi = raw_->Get<abi::DeviceCreateGpuInstanceWithPlacementFn>(
      "nvmlDeviceCreateGpuInstanceWithPlacement");
  auto create_ci =
      raw_->Get<abi::GpuInstanceCreateComputeInstanceFn>("nvmlGpuInstanceCreateComputeInstance");
  auto destroy_gi = raw_->Get<abi::GpuInstanceDestroyFn>("nvmlGpuInstanceDestroy");
  auto destroy_ci = raw_->Get<abi::ComputeInstanceDestroyFn>("nvmlComputeInstanceDestroy");
  abi::DeviceHandle gpu = Gpu(0);

  // 3g.40gb (profile id 9): placements 0 and 4, four memory slices each; answered with MIG off.
  unsigned int count = 0;
  ASSERT_EQ(placements(gpu, 9, nullptr, &count), abi::kSuccess);
  ASSERT_EQ(count, 2u);
  abi::GpuInstancePlacement list[2] = {};
  ASSERT_EQ(placements(gpu, 9, list, &count), abi::kSuccess);
  EXPECT_EQ(list[0].start, 0u);
  EXPECT_EQ(list[1].start, 4u);
  EXPECT_EQ(list[1].size, 4u);

  abi::GpuInstanceHandle gi = nullptr;
  const abi::GpuInstancePlacement at4{4, 4};
  EXPECT_EQ(create_gi(gpu, 9, &at4, &gi), abi::kErrorNotSupported);  // MIG off
  abi::Return activation = -1;
  ASSERT_EQ(set_mode(gpu, abi::kFeatureEnabled, &activation), abi::kSuccess);
  EXPECT_EQ(activation, abi::kSuccess);  // Hopper: active at once
  unsigned int current = 0, pending = 0;
  ASSERT_EQ(get_mode(gpu, &current, &pending), abi::kSuccess);
  EXPECT_EQ(current, 1u);

  const abi::GpuInstancePlacement at2{2, 4};
  EXPECT_EQ(create_gi(gpu, 9, &at2, &gi), abi::kErrorInvalidArgument);  // not a possible start
  ASSERT_EQ(create_gi(gpu, 9, &at4, &gi), abi::kSuccess);
  abi::GpuInstanceHandle other = nullptr;
  EXPECT_EQ(create_gi(gpu, 9, &at4, &other), abi::kErrorInsufficientResources);  // occupied
  const abi::GpuInstancePlacement one_at5{5, 1};
  EXPECT_EQ(create_gi(gpu, 19, &one_at5, &other), abi::kErrorInsufficientResources);  // overlap
  abi::ComputeInstanceHandle ci = nullptr;
  ASSERT_EQ(create_ci(gi, 2, &ci), abi::kSuccess);  // the 3-slice compute instance

  EXPECT_EQ(destroy_gi(gi), abi::kErrorInUse);  // its compute instance is still there
  EXPECT_EQ(set_mode(gpu, abi::kFeatureDisabled, &activation), abi::kErrorInUse);
  ASSERT_EQ(destroy_ci(ci), abi::kSuccess);
  ASSERT_EQ(destroy_gi(gi), abi::kSuccess);
  EXPECT_EQ(destroy_gi(gi), abi::kErrorInvalidArgument);  // gone
  ASSERT_EQ(set_mode(gpu, abi::kFeatureDisabled, &activation), abi::kSuccess);
  ASSERT_EQ(get_mode(gpu, &current, &pending), abi::kSuccess);
  EXPECT_EQ(current, 0u);
  EXPECT_EQ(shutdown_(), abi::kSuccess);
}

// A100 (toggle_requires_reset): disabling MIG on the GPU without instances only becomes pending.
TEST_F(MockNvmlTest, AmpereMigModeChangeStaysPending) {
  Make("a100-mig-4x");
  ASSERT_EQ(init_(0), abi::kSuccess);
  auto set_mode = raw_->Get<abi::DeviceSetMigModeFn>("nvmlDeviceSetMigMode");
  auto get_mode = raw_->Get<abi::DeviceGetMigModeFn>("nvmlDeviceGetMigMode");
  abi::Return activation = -1;
  unsigned int current = 0, pending = 0;
  ASSERT_EQ(set_mode(Gpu(3), abi::kFeatureDisabled, &activation), abi::kSuccess);
  EXPECT_EQ(activation, abi::kErrorResetRequired);
  ASSERT_EQ(get_mode(Gpu(3), &current, &pending), abi::kSuccess);
  EXPECT_EQ(current, 1u);
  EXPECT_EQ(pending, 0u);
  EXPECT_EQ(shutdown_(), abi::kSuccess);
}

// "In use by another client" (a process holding the GPU instance) as the forced error
// MOCK_NVML_FORCED_ERRORS=nvmlGpuInstanceDestroy=19: the destroy fails and the instance stays.
TEST_F(MockNvmlTest, ForcedInUseOnGpuInstanceDestroy) {
  ::setenv("MOCK_NVML_FORCED_ERRORS", "nvmlGpuInstanceDestroy=19", 1);
  Make("a100-mig-4x");
  ASSERT_EQ(init_(0), abi::kSuccess);
  ::unsetenv("MOCK_NVML_FORCED_ERRORS");
  auto create_gi = raw_->Get<abi::DeviceCreateGpuInstanceWithPlacementFn>(
      "nvmlDeviceCreateGpuInstanceWithPlacement");
  auto destroy_gi = raw_->Get<abi::GpuInstanceDestroyFn>("nvmlGpuInstanceDestroy");
  abi::GpuInstanceHandle gi = nullptr;
  const abi::GpuInstancePlacement at0{0, 1};
  ASSERT_EQ(create_gi(Gpu(3), 19, &at0, &gi), abi::kSuccess);
  EXPECT_EQ(destroy_gi(gi), abi::kErrorInUse);
  abi::GpuInstanceHandle again = nullptr;
  EXPECT_EQ(create_gi(Gpu(3), 19, &at0, &again), abi::kErrorInsufficientResources);  // still there
  EXPECT_EQ(shutdown_(), abi::kSuccess);
}

}  // namespace
