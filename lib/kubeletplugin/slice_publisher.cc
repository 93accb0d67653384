#include "lib/kubeletplugin/slice_publisher.h"

#include <malloc.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/common/json_access.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/objects_core.h"

namespace dra::kubeletplugin {
namespace {

using k8s::ResourceSlice;

constexpr absl::Duration kFirstRetry = absl::Milliseconds(5);

// The spec of a slice as JSON, for comparing desired against stored. Taint timeAdded is set by
// the server when the driver leaves it empty, so it only counts when the driver sets it.
nlohmann::json SpecJson(k8s::ResourceSliceSpec spec, const k8s::ResourceSliceSpec* desired) {
  if (desired != nullptr) {
    for (size_t d = 0; d < spec.devices.size() && d < desired->devices.size(); ++d) {
      auto& taints = spec.devices[d].taints;
      const auto& want = desired->devices[d].taints;
      for (size_t t = 0; t < taints.size() && t < want.size(); ++t) {
        if (!want[t].time_added) taints[t].time_added.reset();
      }
    }
  }
  ResourceSlice s;
  s.spec = std::move(spec);
  nlohmann::json j = s.ToJson();
  return j.contains("spec") ? j["spec"] : nlohmann::json::object();
}

}  // namespace

int SliceIndexWidth(size_t slice_count) {
  int width = 1;
  for (size_t n = slice_count > 0 ? slice_count - 1 : 0; n >= 16; n /= 16) ++width;
  return std::max(5, width);
}

std::optional<size_t> ParseSliceIndex(const std::string& name, int width) {
  if (name.size() <= static_cast<size_t>(width) || name[width] != '-') return std::nullopt;
  size_t value = 0;
  for (int i = 0; i < width; ++i) {
    char c = name[i];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    value = value * 16 + digit;
  }
  return value;
}

SlicePublisher::SlicePublisher(k8s::Client* client, Options options)
    : client_(client),
      options_(std::move(options)),
      informer_(client, "",
                {.field_selector = absl::StrCat("spec.driver=", options_.driver,
                                                ",spec.nodeName=", options_.node_name)}) {}

absl::StatusOr<std::unique_ptr<SlicePublisher>> SlicePublisher::Create(k8s::Client* client,
                                                                       Options options) {
  if (options.driver.empty() || options.node_name.empty()) {
    return absl::InvalidArgumentError("slice publisher: driver and node name are required");
  }
  if (options.node_uid.empty()) {
    auto node = client->Get(k8s::Node::kResource, "", options.node_name);
    if (!node.ok()) {
      return Annotate(node.status(), "slice publisher: look up the owner Node");
    }
    // Only metadata.uid is needed (the owner reference), so only it is checked.
    absl::StatusOr<const nlohmann::json*> meta = json_access::GetObject(*node, "", "metadata");
    absl::StatusOr<std::string> uid = meta.ok() ? json_access::GetString(**meta, "metadata", "uid")
                                                : absl::StatusOr<std::string>(meta.status());
    if (!uid.ok()) {
      return Annotate(uid.status(),
                      absl::StrCat("slice publisher: owner Node ", options.node_name));
    }
    options.node_uid = *std::move(uid);
  }
  auto p = std::unique_ptr<SlicePublisher>(new SlicePublisher(client, std::move(options)));
  auto on_change = [raw = p.get()](const k8s::Informer<ResourceSlice>::Ptr& s) {
    raw->Enqueue(s->spec.pool.name, raw->options_.resync_delay);
  };
  p->informer_.AddHandlers({.on_add = on_change,
                            .on_update = [on_change](const auto&, const auto& s) { on_change(s); },
                            .on_delete = on_change});
  p->informer_.Start();
  p->worker_ = std::thread([raw = p.get()] { raw->Run(); });
  return p;
}

SlicePublisher::~SlicePublisher() { Stop(); }

void SlicePublisher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  informer_.Stop();
  if (worker_.joinable()) worker_.join();
}

int SlicePublisher::writes() const {
  absl::MutexLock lock(&mu_);
  return writes_;
}

void SlicePublisher::Update(DriverResources resources) {
  absl::MutexLock lock(&mu_);
  absl::Time now = absl::Now();
  for (const auto* pools : {&desired_.pools, &resources.pools}) {
    for (const auto& [name, pool] : *pools) {
      queue_[name] = now;
      unsynced_.insert(name);
    }
  }
  queued_ = true;
  desired_ = std::move(resources);
}

void SlicePublisher::Enqueue(const std::string& pool, absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  absl::Time due = absl::Now() + delay;
  auto it = queue_.find(pool);
  if (it == queue_.end() || it->second > due) {
    queue_[pool] = due;
    queued_ = true;
  }
}

absl::Status SlicePublisher::WaitForSync(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !busy_ && unsynced_.empty() && failures_.empty();
  };
  absl::Time deadline = absl::Now() + timeout;
  while (!idle()) {
    if (absl::Now() >= deadline) {
      return last_error_.ok() ? absl::DeadlineExceededError("resource slices not in sync yet")
                              : last_error_;
    }
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](bool* b) { return *b; }, &stop_),
                         absl::Milliseconds(10));
  }
  return absl::OkStatus();
}

void SlicePublisher::Run() {
  while (true) {
    std::string pool;
    {
      absl::MutexLock lock(&mu_);
      while (!stop_) {
        queued_ = false;
        if (!informer_synced_ && informer_.HasSynced()) {
          // Whatever happened to our slices between the first syncs and the informer's first
          // list (a wipe, say) came with no event: sync every desired pool once more.
          informer_synced_ = true;
          const absl::Time now = absl::Now();
          for (const auto& [name, pool] : desired_.pools) {
            auto it = queue_.find(name);
            if (it == queue_.end() || it->second > now) queue_[name] = now;
          }
        }
        auto next =
            std::min_element(queue_.begin(), queue_.end(),
                             [](const auto& a, const auto& b) { return a.second < b.second; });
        absl::Time now = absl::Now();
        if (next != queue_.end() && next->second <= now) {
          pool = next->first;
          queue_.erase(next);
          unsynced_.erase(pool);
          busy_ = true;
          break;
        }
        absl::Duration wait = next == queue_.end() ? absl::Milliseconds(100) : next->second - now;
        mu_.AwaitWithTimeout(absl::Condition(this, &SlicePublisher::WakeLocked),
                             std::min(wait, absl::Milliseconds(100)));
      }
      if (stop_) return;
    }
    absl::Status s = SyncPool(pool);
    // A sync decodes the pool's slices, and the informer has decoded their events before it: with
    // DynamicMIG, hundreds of devices, megabytes freed at once that malloc keeps unless asked
    // (docs/performance.md "On a quiet machine"). Syncs are rare next to what they save.
    malloc_trim(0);
    absl::MutexLock lock(&mu_);
    busy_ = false;
    if (s.ok()) {
      failures_.erase(pool);
      if (failures_.empty()) last_error_ = absl::OkStatus();
      continue;
    }
    unsynced_.insert(pool);
    int n = ++failures_[pool];
    absl::Duration delay = std::min(kFirstRetry * (1 << std::min(n, 20)), options_.max_retry_delay);
    DRA_WARNING("publishing resource slices failed; will retry", "pool", pool, "err", s, "retryIn",
                delay);
    last_error_ = s;
    absl::Time due = absl::Now() + delay;
    auto it = queue_.find(pool);
    if (it == queue_.end() || it->second > due) queue_[pool] = due;
  }
}

absl::Status SlicePublisher::SyncPool(const std::string& pool_name) {
  std::optional<Pool> desired;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = desired_.pools.find(pool_name); it != desired_.pools.end()) desired = it->second;
  }
  // The first sync of a pool lists from the API server's watch cache (resourceVersion "0"): a
  // consistent list waits for that cache to catch up with etcd, which on a quiet resource takes
  // until etcd's next progress notification (about 80 ms measured, most of the start -> slices
  // time). The cache may miss a write of the last moments (a slice of an instance that has just
  // stopped); the sync then creates a duplicate or its update conflicts, and both are repaired:
  // the conflict is retried and the watch event of the missed slice triggers a resync, which
  // deletes the surplus slice. Every later sync lists consistently.
  const bool from_cache = tried_.insert(pool_name).second;
  const absl::Time sync_start = absl::Now();
  ASSIGN_OR_RETURN(
      nlohmann::json list,
      client_->ListAll(ResourceSlice::kResource, "",
                       {.field_selector = absl::StrCat("spec.driver=", options_.driver,
                                                       ",spec.nodeName=", options_.node_name),
                        .resource_version = from_cache ? "0" : ""}));
  const absl::Duration list_time = absl::Now() - sync_start;
  std::vector<ResourceSlice> existing;
  // ListAll answers in a checked shape (lib/k8s/wire_decode.h): items is an array of objects.
  for (const nlohmann::json& item : json_access::ArrayOrEmpty(list, "items")) {
    auto s = ResourceSlice::FromJson(item);
    if (!s.ok()) return Annotate(s.status(), "decode existing resource slice");
    if (s->spec.pool.name == pool_name) existing.push_back(std::move(*s));
  }
  auto count_write = [this] {
    absl::MutexLock lock(&mu_);
    ++writes_;
  };
  auto remove = [&](const ResourceSlice& s) -> absl::Status {
    absl::Status st =
        client_->Delete(ResourceSlice::kResource, "", s.metadata.name,
                        {.uid = s.metadata.uid, .resource_version = s.metadata.resource_version});
    count_write();
    if (!st.ok() && !absl::IsNotFound(st)) return st;
    return absl::OkStatus();
  };
  if (!desired) {
    for (const ResourceSlice& s : existing) RETURN_IF_ERROR(remove(s));
    if (!existing.empty()) {
      DRA_INFO("deleted resource slices of a pool no longer published", "pool", pool_name, "slices",
               existing.size());
    }
    return absl::OkStatus();
  }

  const size_t n = desired->slices.size();
  const int width = SliceIndexWidth(n);
  int64_t generation = 0;
  for (const ResourceSlice& s : existing) generation = std::max(generation, s.spec.pool.generation);
  std::vector<const ResourceSlice*> matched(n, nullptr);
  std::vector<const ResourceSlice*> obsolete;
  for (const ResourceSlice& s : existing) {
    std::optional<size_t> idx = ParseSliceIndex(s.metadata.name, width);
    if (s.spec.pool.generation < generation || !idx || *idx >= n || matched[*idx] != nullptr) {
      obsolete.push_back(&s);
    } else {
      matched[*idx] = &s;
    }
  }
  auto desired_spec = [&](size_t i, int64_t gen) {
    k8s::ResourceSliceSpec spec;
    spec.driver = options_.driver;
    spec.pool = {
        .name = pool_name, .generation = gen, .resource_slice_count = static_cast<int64_t>(n)};
    spec.node_name = options_.node_name;
    spec.devices = desired->slices[i].devices;
    spec.shared_counters = desired->slices[i].shared_counters;
    spec.per_device_node_selection = desired->slices[i].per_device_node_selection;
    return spec;
  };
  size_t added = 0;
  std::vector<bool> changed(n, false);
  size_t changed_count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (matched[i] == nullptr) {
      ++added;
      continue;
    }
    k8s::ResourceSliceSpec want = desired_spec(i, generation);
    changed[i] = SpecJson(matched[i]->spec, &want) != SpecJson(want, nullptr);
    changed_count += changed[i];
  }
  int64_t new_generation = generation;
  if (desired->generation > generation) {
    new_generation = desired->generation;
  } else if (added > 0 || changed_count > 1) {
    new_generation = generation + 1;
  }
  const bool rewrite_all = new_generation != generation;

  for (const ResourceSlice* s : obsolete) RETURN_IF_ERROR(remove(*s));
  for (size_t i = 0; i < n; ++i) {
    if (matched[i] == nullptr || !(rewrite_all || changed[i])) continue;
    nlohmann::json body = matched[i]->raw;
    body["spec"] = SpecJson(desired_spec(i, new_generation), nullptr);
    auto r = client_->Update(ResourceSlice::kResource, "", body);
    count_write();
    if (!r.ok()) return r.status();
  }
  for (size_t i = 0; i < n; ++i) {
    if (matched[i] != nullptr) continue;
    ResourceSlice s;
    s.metadata.generate_name = absl::StrCat(absl::StrFormat("%0*x", width, i), "-", options_.driver,
                                            "-", options_.node_name, "-");
    s.metadata.owner_references.push_back({.api_version = "v1",
                                           .kind = "Node",
                                           .name = options_.node_name,
                                           .uid = options_.node_uid,
                                           .controller = true});
    s.spec = desired_spec(i, new_generation);
    auto r = client_->Create(ResourceSlice::kResource, "", s.ToJson());
    count_write();
    if (!r.ok()) return r.status();
  }
  if (!obsolete.empty() || added > 0 || changed_count > 0 || rewrite_all) {
    DRA_INFO("published resource slices", "pool", pool_name, "generation", new_generation, "slices",
             n, "created", added, "updated", rewrite_all ? n - added : changed_count, "deleted",
             obsolete.size(), "listTime", list_time, "syncTime", absl::Now() - sync_start);
  }
  return absl::OkStatus();
}

}  // namespace dra::kubeletplugin
