#include "lib/cdi/root_transform.h"

#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace dra::cdi {
namespace {

struct PrefixCase {
  std::string path, from, to;
  std::optional<std::string> want;
};

class RewritePathPrefixTest : public ::testing::TestWithParam<PrefixCase> {};

TEST_P(RewritePathPrefixTest, Rewrites) {
  const PrefixCase& c = GetParam();
  EXPECT_EQ(RewritePathPrefix(c.path, c.from, c.to), c.want)
      << c.path << " from " << c.from << " to " << c.to;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RewritePathPrefixTest,
    ::testing::Values(PrefixCase{"/driver-root/usr/lib/x.so", "/driver-root", "/", "/usr/lib/x.so"},
                      PrefixCase{"/driver-root/usr/lib/x.so", "/driver-root", "/run/nvidia/driver",
                                 "/run/nvidia/driver/usr/lib/x.so"},
                      PrefixCase{"/driver-root/usr/lib/x.so", "/driver-root/",
                                 "/run/nvidia/driver/", "/run/nvidia/driver/usr/lib/x.so"},
                      PrefixCase{"/driver-root", "/driver-root", "/", "/"},
                      PrefixCase{"/driver-root", "/driver-root", "/host", "/host"},
                      PrefixCase{"/driver-rootx/lib", "/driver-root", "/", std::nullopt},
                      PrefixCase{"/usr/lib/x.so", "/driver-root", "/", std::nullopt},
                      PrefixCase{"relative/x", "/driver-root", "/", std::nullopt},
                      PrefixCase{"/usr/lib/x.so", "/", "/run/nvidia/driver",
                                 "/run/nvidia/driver/usr/lib/x.so"},
                      PrefixCase{"/", "/", "/host", "/host"},
                      PrefixCase{"/usr/lib/x.so", "/", "/", "/usr/lib/x.so"}));

TEST(TransformRoot, RewritesHostPathsOnly) {
  Spec spec;
  spec.container_edits.device_nodes = {
      {.path = "/dev/nvidiactl", .host_path = "/driver-root/dev/nvidiactl"},
      {.path = "/driver-root/dev/x"},  // empty hostPath defaults to path
      {.path = "/dev/nvidia0"},        // not under the root: stays without hostPath
  };
  spec.container_edits.mounts = {
      {.host_path = "/driver-root/usr/lib/libcuda.so.1", .container_path = "/usr/lib/libcuda.so.1"},
      {.host_path = "/var/lib/other", .container_path = "/driver-root/other"},
  };
  spec.container_edits.hooks = {{.hook_name = "createContainer", .path = "/driver-root/bin/hook"}};
  Device dev{.name = "d"};
  dev.container_edits.mounts = {
      {.host_path = "/driver-root/bin/smi", .container_path = "/bin/smi"}};
  spec.devices.push_back(dev);

  TransformRoot(spec, "/driver-root", "/run/nvidia/driver");

  const ContainerEdits& e = spec.container_edits;
  EXPECT_EQ(e.device_nodes[0].path, "/dev/nvidiactl");
  EXPECT_EQ(e.device_nodes[0].host_path, "/run/nvidia/driver/dev/nvidiactl");
  EXPECT_EQ(e.device_nodes[1].path, "/driver-root/dev/x");
  EXPECT_EQ(e.device_nodes[1].host_path, "/run/nvidia/driver/dev/x");
  EXPECT_EQ(e.device_nodes[2].host_path, "");
  EXPECT_EQ(e.mounts[0].host_path, "/run/nvidia/driver/usr/lib/libcuda.so.1");
  EXPECT_EQ(e.mounts[0].container_path, "/usr/lib/libcuda.so.1");
  EXPECT_EQ(e.mounts[1].host_path, "/var/lib/other");
  EXPECT_EQ(e.mounts[1].container_path, "/driver-root/other");
  EXPECT_EQ(e.hooks[0].path, "/run/nvidia/driver/bin/hook");
  EXPECT_EQ(spec.devices[0].container_edits.mounts[0].host_path, "/run/nvidia/driver/bin/smi");
}

TEST(TransformRoot, NoOpWhenRootsAreEqual) {
  ContainerEdits edits;
  edits.device_nodes = {{.path = "/dev/x"}};
  edits.mounts = {{.host_path = "/a/b", .container_path = "/b"}};
  const ContainerEdits before = edits;
  TransformRoot(edits, "/", "/");
  EXPECT_EQ(edits, before);
  TransformRoot(edits, "/a/", "/a");
  EXPECT_EQ(edits, before);
}

TEST(TransformRoot, ToHostRootKeepsDefaultedHostPathEmpty) {
  ContainerEdits edits;
  edits.device_nodes = {{.path = "/dev/x"}};
  TransformRoot(edits, "/", "/");
  EXPECT_EQ(edits.device_nodes[0].host_path, "");
}

}  // namespace
}  // namespace dra::cdi
