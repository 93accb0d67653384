#include "bench/common/bench_node.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/objects_resource.h"
#include "test/support/cluster_env.h"

namespace dra::bench {
namespace {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;

// Whether `list` (a ResourceSlice list) holds at least one pool and every slice of each: as many
// slices of the pool's newest generation as that generation's resourceSliceCount. The scheduler
// uses a pool only once it is complete; the first of several slices is not yet "published".
bool PoolsComplete(const nlohmann::json& list) {
  struct Seen {
    int64_t generation = -1;
    int64_t want = 0;
    int64_t have = 0;
  };
  std::map<std::string, Seen> pools;
  for (const nlohmann::json& item : list.value("items", nlohmann::json::array())) {
    absl::StatusOr<k8s::ResourceSlice> slice = k8s::ResourceSlice::FromJson(item);
    if (!slice.ok()) return false;
    const k8s::ResourcePool& pool = slice->spec.pool;
    Seen& seen = pools[pool.name];
    if (pool.generation > seen.generation) {
      seen = {.generation = pool.generation, .want = pool.resource_slice_count, .have = 0};
    }
    if (pool.generation == seen.generation) ++seen.have;
  }
  for (const auto& [name, seen] : pools) {
    if (seen.have < seen.want) return false;
  }
  return !pools.empty();
}

constexpr char kNamespace[] = "default";
constexpr char kMemoryHierarchy[] = "/sys/fs/cgroup/memory";

// This process's cgroup in the v1 memory hierarchy ("/process_api/..."), from /proc/self/cgroup.
absl::StatusOr<std::string> OwnMemoryCgroup() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    // "4:memory:/path"
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    if (absl::StrContains(absl::StrCat(",", controllers, ","), ",memory,")) {
      return line.substr(b + 1);
    }
  }
  return absl::NotFoundError("no v1 memory cgroup in /proc/self/cgroup");
}

// A copy of `from` at `to` (mode 0755) whose pages are not in the page cache: written, synced,
// then dropped (POSIX_FADV_DONTNEED drops clean, unmapped pages), so that the first process that
// maps it reads it from disk and its cgroup is charged for the pages.
absl::Status FreshCopy(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", from));
  {
    std::ofstream out(to, std::ios::binary);
    out << in.rdbuf();
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", to));
  }
  const int fd = open(to.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", to, ": ", std::strerror(errno)));
  const bool ok = fchmod(fd, 0755) == 0 && fdatasync(fd) == 0 &&
                  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  const int err = errno;
  close(fd);
  if (!ok) return absl::InternalError(absl::StrCat("preparing ", to, ": ", std::strerror(err)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CgroupMemory> ReadCgroupMemory(const std::string& dir) {
  CgroupMemory m;
  auto read_number = [&](const char* file, int64_t* v) -> absl::Status {
    std::ifstream in(absl::StrCat(dir, "/", file));
    if (!(in >> *v)) return absl::NotFoundError(absl::StrCat("cannot read ", dir, "/", file));
    return absl::OkStatus();
  };
  if (absl::Status s = read_number("memory.usage_in_bytes", &m.usage); !s.ok()) return s;
  if (absl::Status s = read_number("memory.max_usage_in_bytes", &m.max_usage); !s.ok()) return s;
  std::ifstream stat(dir + "/memory.stat");
  if (!stat) return absl::NotFoundError(absl::StrCat("cannot read ", dir, "/memory.stat"));
  std::string key;
  int64_t value = 0;
  while (stat >> key >> value) {
    if (key == "total_inactive_file") m.inactive_file = value;
    if (key == "total_active_file") m.active_file = value;
    if (key == "total_rss") m.rss = value;
  }
  return m;
}

std::string FormatCgroupMemory(const absl::StatusOr<CgroupMemory>& m) {
  if (!m.ok()) return absl::StrCat("(no cgroup figures: ", m.status().message(), ")");
  auto mib = [](int64_t b) { return absl::StrFormat("%.1f", static_cast<double>(b) / 1048576.0); };
  return absl::StrCat("ws ", mib(m->working_set()), " MiB (usage ", mib(m->usage),
                      ", inactive_file ", mib(m->inactive_file), ", active_file ",
                      mib(m->active_file), ", rss ", mib(m->rss), "; peak usage ",
                      mib(m->max_usage), ")");
}

void Die(const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, what.c_str());
  std::exit(1);
}

BenchNode::BenchNode(Options options) : options_(std::move(options)) {
  auto rest = Check(k8s::LoadKubeconfig(testing::AdminKubeconfig()),
                    "kubeconfig (start the cluster with hack/cluster/up.sh)");
  client_ = Check(k8s::Client::Create(rest, {.qps = 0}), "client");
  const std::string root = tmp_.path() + "/driver-root";
  if (auto s = testing::MakeMockDriverRoot("h100-8x", root); !s.ok()) Die(std::string(s.message()));
  const std::string kubelet = tmp_.path() + "/kubelet";
  std::system(absl::StrCat("mkdir -p ", kubelet, "/plugins ", kubelet, "/registry").c_str());
  node_ = absl::StrCat(options_.node_prefix, "-", getpid());
  Check(client_->Create(k8s::Node::kResource, "",
                        {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node_}}}}),
        "create node");
  // As on a node: CDI specs on tmpfs (/var/run/cdi), the checkpoint on disk under the kubelet's
  // plugin directory.
  cdi_root_ = absl::StrCat("/dev/shm/", options_.tool, "-cdi-", getpid());
  log_ = tmp_.path() + "/plugin.log";

  // The plugin's own memory cgroup and a fresh copy of its binary (bench_node.h says why).
  std::string binary = options_.plugin;
  if (auto own = OwnMemoryCgroup(); !own.ok()) {
    cgroup_error_ = std::string(own.status().message());
  } else {
    const std::string dir =
        absl::StrCat(kMemoryHierarchy, *own == "/" ? "" : *own, "/", options_.tool, "-", getpid());
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      cgroup_error_ = absl::StrCat("mkdir ", dir, ": ", std::strerror(errno));
    } else if (absl::Status s = FreshCopy(options_.plugin, tmp_.path() + "/gpu-kubelet-plugin");
               !s.ok()) {
      rmdir(dir.c_str());
      cgroup_error_ = std::string(s.message());
    } else {
      cgroup_ = dir;
      binary = tmp_.path() + "/gpu-kubelet-plugin";
    }
  }
  const std::string procs = cgroup_.empty() ? "" : cgroup_ + "/cgroup.procs";

  std::vector<std::string> args = {binary,
                                   "--node-name=" + node_,
                                   "--kubeconfig=" + testing::AdminKubeconfig(),
                                   "--cdi-root=" + cdi_root_,
                                   "--nvidia-driver-root=" + root,
                                   "--container-driver-root=" + root,
                                   "--proc-root=" + root + "/proc",
                                   "--kubelet-plugins-directory-path=" + kubelet + "/plugins",
                                   "--kubelet-registrar-directory-path=" + kubelet + "/registry"};
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const absl::Time start = absl::Now();
  started_at_ = start;
  pid_ = fork();
  if (pid_ == 0) {
    if (std::freopen(log_.c_str(), "w", stderr) == nullptr) _exit(126);
    if (!procs.empty()) {
      // "0": the writing process itself. A plugin outside its cgroup would be measured wrongly.
      const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || write(fd, "0", 1) != 1) _exit(125);
      close(fd);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  for (;;) {
    int wstatus = 0;
    if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      if (!cgroup_.empty()) rmdir(cgroup_.c_str());
      Die(absl::StrCat("the plugin exited (",
                       WIFEXITED(wstatus) ? absl::StrCat("status ", WEXITSTATUS(wstatus))
                                          : absl::StrCat("signal ", WTERMSIG(wstatus)),
                       "; 125: it could not join ", procs,
                       ", 127: no exec) before its slices; log ", log_));
    }
    auto list = client_->List(k8s::ResourceSlice::kResource, "",
                              {.field_selector = "spec.nodeName=" + node_});
    if (list.ok() && PoolsComplete(*list)) break;
    if (absl::Now() - start > absl::Seconds(30)) Die("no ResourceSlice within 30s; log " + log_);
    absl::SleepFor(absl::Milliseconds(2));
  }
  time_to_slices_ = absl::Now() - start;
  stub_ = drapb::DRAPlugin::NewStub(
      grpc::CreateChannel("unix://" + kubelet + "/plugins/gpu.nvidia.com/dra.sock",
                          grpc::InsecureChannelCredentials()));
}

BenchNode::~BenchNode() { Stop(); }

absl::StatusOr<CgroupMemory> BenchNode::PluginCgroupMemory() const {
  if (cgroup_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the plugin runs in the bench's own cgroup: ", cgroup_error_));
  }
  return ReadCgroupMemory(cgroup_);
}

void BenchNode::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  // Empty now; its page-cache charges move to the parent (cgroup v1).
  if (!cgroup_.empty()) rmdir(cgroup_.c_str());
  std::system(("rm -rf " + cdi_root_).c_str());
  for (const std::string& name : claims_) {
    (void)client_->Delete(k8s::Pod::kResource, kNamespace, name);
    (void)client_->Delete(k8s::ResourceClaim::kResource, kNamespace, name);
  }
  (void)client_->Delete(k8s::Node::kResource, "", node_);
  auto slices = client_->ListAll(k8s::ResourceSlice::kResource, "",
                                 {.field_selector = "spec.nodeName=" + node_});
  if (slices.ok()) {
    for (const auto& s : (*slices)["items"]) {
      (void)client_->Delete(k8s::ResourceSlice::kResource, "", s["metadata"]["name"]);
    }
  }
}

std::string BenchNode::CreateAllocatedClaim(int i) {
  return CreateAllocatedClaim(i, absl::StrCat("gpu-", i % 8), "gpu.nvidia.com");
}

std::string BenchNode::CreateAllocatedClaim(int i, const std::string& device,
                                            const std::string& device_class) {
  const std::string name = ClaimName(i);
  nlohmann::json c = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", kNamespace}}},
      {"spec",
       {{"devices",
         {{"requests", {{{"name", "gpu"}, {"exactly", {{"deviceClassName", device_class}}}}}}}}}}};
  auto created = Check(client_->Create(k8s::ResourceClaim::kResource, kNamespace, c), "claim");
  claims_.push_back(name);
  // The pod the claim is reserved for, bound to this node (no kubelet runs it): the API server's
  // claim controller drops reservations for pods that do not exist, and the plugin's claim cache
  // then forgets the claim, so a reservation without its pod turns prepares into GETs.
  nlohmann::json pod = {{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata", {{"name", name}, {"namespace", kNamespace}}},
                        {"spec",
                         {{"nodeName", node_},
                          {"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", name}}}},
                          {"containers",
                           {{{"name", "c"},
                             {"image", "bench.invalid/none"},
                             {"resources", {{"claims", {{{"name", "gpu"}}}}}}}}}}}};
  auto made_pod = Check(client_->Create(k8s::Pod::kResource, kNamespace, pod), "pod");
  nlohmann::json result = {
      {"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", node_}, {"device", device}};
  created["status"] = {
      {"allocation", {{"devices", {{"results", nlohmann::json::array({result})}}}}},
      // As the scheduler reserves it for the pod (the kubelet prepares only reserved claims; the
      // plugin's claim cache keeps only those).
      {"reservedFor",
       {{{"resource", "pods"},
         {"name", name},
         {"uid", made_pod["metadata"]["uid"].get<std::string>()}}}}};
  auto updated =
      Check(client_->UpdateStatus(k8s::ResourceClaim::kResource, kNamespace, created), "allocate");
  return updated["metadata"]["uid"].get<std::string>();
}

void BenchNode::Prepare(int i, const std::string& uid) {
  drapb::NodePrepareResourcesRequest req;
  auto* claim = req.add_claims();
  claim->set_namespace_(kNamespace);
  claim->set_name(ClaimName(i));
  claim->set_uid(uid);
  drapb::NodePrepareResourcesResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(45));
  grpc::Status s = stub_->NodePrepareResources(&ctx, req, &resp);
  if (!s.ok()) Die("NodePrepareResources: " + s.error_message());
  if (!resp.claims().at(uid).error().empty()) Die("prepare: " + resp.claims().at(uid).error());
}

void BenchNode::Unprepare(int i, const std::string& uid) {
  drapb::NodeUnprepareResourcesRequest req;
  auto* claim = req.add_claims();
  claim->set_namespace_(kNamespace);
  claim->set_name(ClaimName(i));
  claim->set_uid(uid);
  drapb::NodeUnprepareResourcesResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(45));
  grpc::Status s = stub_->NodeUnprepareResources(&ctx, req, &resp);
  if (!s.ok()) Die("NodeUnprepareResources: " + s.error_message());
  if (!resp.claims().at(uid).error().empty()) Die("unprepare: " + resp.claims().at(uid).error());
}

void BenchNode::PrepareNothing() {
  drapb::NodePrepareResourcesRequest req;
  drapb::NodePrepareResourcesResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(45));
  grpc::Status s = stub_->NodePrepareResources(&ctx, req, &resp);
  if (!s.ok()) Die("NodePrepareResources (no claims): " + s.error_message());
  if (resp.claims_size() != 0) Die("NodePrepareResources (no claims) answered claims");
}

}  // namespace dra::bench
