#pragma once

// What the plugin benchmarks share: a gpu-kubelet-plugin started as a host process for a fresh
// Node object of the real local API server (hack/cluster/up.sh), with a mock driver root of 8 H100s
// and its own kubelet directories, plus the kubelet's side of the DRA socket. Not a test helper:
// on any failure it prints "<program>: <what>" and exits 1.
//
// The plugin runs in a memory cgroup of its own (cgroup v1: a child "<tool>-<pid>" of the bench's
// own memory cgroup), as a container does, so that the benches can print its memory the way the
// kubelet counts a container's: the cgroup's working set (usage - total_inactive_file; cadvisor
// container/libcontainer/handler.go setMemoryStats). It execs a fresh copy of the plugin binary
// whose page cache was dropped, so that the binary's pages are read, and charged, by the plugin's
// cgroup as they are by a container that reads its image's binary first. The shared libraries'
// pages (libc, libstdc++, libcrypto, libssl) are usually cached already and charged to whoever read
// them first: they are not in these figures. Without a writable v1 memory hierarchy (not root,
// cgroup v2 only) the plugin runs in the bench's cgroup and the benches say so.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "lib/k8s/client.h"
#include "proto/dra/v1/api.grpc.pb.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::bench {

[[noreturn]] void Die(const std::string& what);

template <typename T>
T Check(absl::StatusOr<T> v, const std::string& what) {
  if (!v.ok()) Die(absl::StrCat(what, ": ", v.status().message()));
  return std::move(*v);
}

// A memory cgroup's figures (bytes): memory.usage_in_bytes, memory.max_usage_in_bytes (the peak
// usage since the cgroup was made) and memory.stat's total_inactive_file, total_active_file and
// total_rss (anonymous memory).
struct CgroupMemory {
  int64_t usage = 0, max_usage = 0, inactive_file = 0, active_file = 0, rss = 0;
  // What the kubelet and `kubectl top` report for a container: usage minus the inactive page cache.
  int64_t working_set() const { return usage > inactive_file ? usage - inactive_file : 0; }
};

// The figures of the v1 memory cgroup at `dir` (/sys/fs/cgroup/memory/...); an error names the
// file that could not be read.
absl::StatusOr<CgroupMemory> ReadCgroupMemory(const std::string& dir);

// "ws W MiB (usage U, inactive_file I, active_file A, rss R; peak usage P)" or why there is none.
std::string FormatCgroupMemory(const absl::StatusOr<CgroupMemory>& m);

class BenchNode {
 public:
  struct Options {
    std::string tool;         // the benchmark's name (its CDI folder is named after it)
    std::string plugin;       // path of the gpu-kubelet-plugin binary
    std::string node_prefix;  // the Node is "<prefix>-<pid>"
    std::vector<std::string> extra_args;
  };

  // Creates the Node, starts the plugin and waits (30 s at most) until its ResourceSlices are
  // visible in the API server: every slice of each of its pools (resourceSliceCount), as the
  // scheduler needs them.
  explicit BenchNode(Options options);
  ~BenchNode();  // Stop()
  BenchNode(const BenchNode&) = delete;
  BenchNode& operator=(const BenchNode&) = delete;

  // SIGTERM to the plugin, then deletes the claims made here, the Node, its slices and CDI specs.
  void Stop();

  pid_t pid() const { return pid_; }
  const std::string& node() const { return node_; }
  k8s::Client* client() { return client_.get(); }
  absl::Duration time_to_slices() const { return time_to_slices_; }
  // When the plugin was forked (wall clock, as its log's timestamps).
  absl::Time started_at() const { return started_at_; }
  const std::string& log_path() const { return log_; }
  // The plugin's own memory cgroup (a directory), or empty when it runs in the bench's.
  const std::string& cgroup() const { return cgroup_; }
  // Its figures; an error when there is no cgroup of its own or it could not be read.
  absl::StatusOr<CgroupMemory> PluginCgroupMemory() const;

  // A ResourceClaim "<node>-c<i>" in namespace default, allocated (status written as the
  // scheduler's binding does) to mock GPU gpu-<i % 8>. Returns its UID.
  std::string CreateAllocatedClaim(int i);
  // The same, allocated to the device `device` of the node's pool, requested from the DeviceClass
  // `device_class` (e.g. a dynamic MIG device "gpu-0-mig-1g10gb-19-0" of class mig.nvidia.com).
  std::string CreateAllocatedClaim(int i, const std::string& device,
                                   const std::string& device_class);
  // One NodePrepareResources / NodeUnprepareResources call for that claim, as the kubelet makes.
  void Prepare(int i, const std::string& uid);
  void Unprepare(int i, const std::string& uid);
  // A NodePrepareResources call with no claims: the plugin answers it before any work (no trace,
  // no lock), so its round trip is the floor of the transport (gRPC over the unix socket, both
  // sides' protobuf, the thread wake-ups) and of this client.
  void PrepareNothing();

 private:
  std::string ClaimName(int i) const { return absl::StrCat(node_, "-c", i); }

  const Options options_;
  testing::TempDir tmp_;
  std::string node_;
  std::string log_;
  std::string cdi_root_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<::k8s::io::kubelet::pkg::apis::dra::v1::DRAPlugin::Stub> stub_;
  std::vector<std::string> claims_;
  std::string cgroup_;
  std::string cgroup_error_;  // why cgroup_ is empty
  pid_t pid_ = -1;
  absl::Duration time_to_slices_;
  absl::Time started_at_;
};

}  // namespace dra::bench
