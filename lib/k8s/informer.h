#pragma once

// Informer<T>: a local, indexed cache of one kind kept in sync by list+watch (Reflector), with
// add/update/delete handlers and periodic resync, like client-go's shared informer.
//
// Handlers run on the informer's own thread, one at a time, in event order, without the cache
// lock held; they may read the cache. After a relist the cache is diffed against the fresh list:
// objects that appeared are Added, changed ones (by resourceVersion) Updated, vanished ones
// Deleted, so an API server restart or a compacted history neither loses nor repeats an object.
//
// An object that does not decode (nested deeper than the client reads, UndecodableObject, or not
// of its kind's shape, T::FromJson) is skipped, never a reason to stop: it is reported once per
// version (ReportUndecodable: a warning and nvidia_dra_undecodable_objects_total{resource}), and
// the cache keeps the last version of that object it could decode, unchanged and without an
// event, or nothing when it never had one. Its deletion still applies (by the identity the
// event carries), a relist keeps that last version while the object is listed, and a later
// version that decodes replaces it as usual. Every other object stays current.
//
// Thread-safety: AddHandlers/AddIndex before Start(); everything else from any thread.

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "lib/common/log.h"
#include "lib/k8s/reflector.h"
#include "lib/k8s/wire_decode.h"

namespace dra::k8s {

template <typename T>
class Informer {
 public:
  using Ptr = std::shared_ptr<const T>;
  struct Handlers {
    std::function<void(const Ptr&)> on_add;
    std::function<void(const Ptr& old_obj, const Ptr& new_obj)> on_update;
    std::function<void(const Ptr&)> on_delete;
  };
  using IndexFunc = std::function<std::vector<std::string>(const T&)>;

  // `ns` empty: all namespaces (or a cluster-scoped kind). `resync` zero: no resync.
  Informer(Client* client, std::string ns = "", ListOptions selectors = {},
           absl::Duration resync = absl::ZeroDuration())
      : resync_(resync),
        reflector_(client, T::kResource, std::move(ns), std::move(selectors),
                   Reflector::Sink{.replace = {},
                                   .event = [this](WatchEvent&& e) { Apply(std::move(e)); },
                                   .replace_all =
                                       [this](std::vector<nlohmann::json>&& items,
                                              std::vector<UndecodableObject>&& undecodable) {
                                         Replace(std::move(items), undecodable);
                                       }}) {}
  ~Informer() { Stop(); }
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void AddHandlers(Handlers h) { handlers_.push_back(std::move(h)); }
  void AddIndex(std::string name, IndexFunc fn) { index_funcs_.emplace(std::move(name), fn); }

  void Start() {
    thread_ = std::thread([this] { reflector_.Run(); });
    if (resync_ > absl::ZeroDuration()) {
      resync_thread_ = std::thread([this] {
        while (!reflector_.stopped() && !stop_resync_.WaitForNotificationWithTimeout(resync_)) {
          Resync();
        }
      });
    }
  }
  void Stop() {
    reflector_.Stop();
    if (!stop_resync_.HasBeenNotified()) stop_resync_.Notify();
    if (thread_.joinable()) thread_.join();
    if (resync_thread_.joinable()) resync_thread_.join();
  }

  bool HasSynced() const { return synced_.HasBeenNotified(); }
  bool WaitForSync(absl::Duration timeout) const {
    return synced_.WaitForNotificationWithTimeout(timeout);
  }

  // Key: "namespace/name" for namespaced kinds, "name" otherwise.
  Ptr Get(absl::string_view key) const {
    absl::MutexLock lock(&mu_);
    auto it = items_.find(key);
    return it == items_.end() ? nullptr : it->second;
  }
  std::vector<Ptr> List() const {
    absl::MutexLock lock(&mu_);
    std::vector<Ptr> out;
    out.reserve(items_.size());
    for (const auto& [k, v] : items_) out.push_back(v);
    return out;
  }
  std::vector<Ptr> ByIndex(absl::string_view index, absl::string_view value) const {
    absl::MutexLock lock(&mu_);
    std::vector<Ptr> out;
    auto idx = indices_.find(std::string(index));
    if (idx == indices_.end()) return out;
    auto keys = idx->second.find(std::string(value));
    if (keys == idx->second.end()) return out;
    for (const std::string& k : keys->second) out.push_back(items_.at(k));
    return out;
  }

  static std::string KeyOf(const T& obj) {
    return obj.metadata.namespace_name.empty()
               ? obj.metadata.name
               : absl::StrCat(obj.metadata.namespace_name, "/", obj.metadata.name);
  }

  const Reflector& reflector() const { return reflector_; }
  // Handler calls that threw (each one logged), since Start.
  int64_t handler_exceptions() const { return handler_exceptions_.load(); }

 private:
  // The typed object, or null when `j` does not decode (reported once per version).
  Ptr Decode(const nlohmann::json& j) {
    auto obj = T::FromJson(j);
    if (!obj.ok()) {
      ReportUndecodable(T::kResource, IdentityOf(j, std::string(obj.status().message())));
      return nullptr;
    }
    return std::make_shared<const T>(std::move(*obj));
  }
  // The cache key of an object known only by its identity.
  static std::string KeyOfIdentity(const nlohmann::json& j) {
    return ::dra::k8s::KeyOf(IdentityOf(j, ""));
  }

  // REQUIRES: mu_ held. Stores `obj` under `key` and updates the indices; returns the old value.
  Ptr StoreLocked(const std::string& key, Ptr obj) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Ptr old;
    if (auto it = items_.find(key); it != items_.end()) old = it->second;
    if (old) UnindexLocked(key, *old);
    if (obj) {
      for (const auto& [name, fn] : index_funcs_) {
        for (std::string& v : fn(*obj)) indices_[name][std::move(v)].insert(key);
      }
      items_[key] = std::move(obj);
    } else {
      items_.erase(key);
    }
    return old;
  }
  void UnindexLocked(const std::string& key, const T& obj) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [name, fn] : index_funcs_) {
      auto& idx = indices_[name];
      for (const std::string& v : fn(obj)) {
        auto it = idx.find(v);
        if (it == idx.end()) continue;
        it->second.erase(key);
        if (it->second.empty()) idx.erase(it);
      }
    }
  }

  void Notify(const Ptr& old_obj, const Ptr& new_obj) {
    absl::MutexLock lock(&notify_mu_);  // resync and watch events never overlap in handlers
    for (const Handlers& h : handlers_) {
      // A handler that throws loses that one event (logged, counted), never the informer's
      // thread: the next event and the next resync reach it as usual.
      try {
        if (old_obj && new_obj) {
          if (h.on_update) h.on_update(old_obj, new_obj);
        } else if (new_obj) {
          if (h.on_add) h.on_add(new_obj);
        } else if (old_obj) {
          if (h.on_delete) h.on_delete(old_obj);
        }
      } catch (const std::exception& e) {
        ++handler_exceptions_;
        DRA_WARNING("informer event handler threw; event lost for that handler", "kind",
                    T::kResource.kind, "object", KeyOf(new_obj ? *new_obj : *old_obj), "err",
                    e.what());
      } catch (...) {
        ++handler_exceptions_;
        DRA_WARNING("informer event handler threw a non-standard exception", "kind",
                    T::kResource.kind, "object", KeyOf(new_obj ? *new_obj : *old_obj));
      }
    }
  }

  void Replace(std::vector<nlohmann::json>&& items,
               const std::vector<UndecodableObject>& undecodable) {
    std::vector<std::pair<Ptr, Ptr>> changes;  // (old, new)
    {
      absl::MutexLock lock(&mu_);
      // Listed but not decodable: the last decodable version stays (see the file comment).
      std::set<std::string> seen;
      for (const UndecodableObject& u : undecodable) seen.insert(::dra::k8s::KeyOf(u));
      for (const nlohmann::json& j : items) {
        Ptr obj = Decode(j);
        if (!obj) {
          seen.insert(KeyOfIdentity(j));
          continue;
        }
        std::string key = KeyOf(*obj);
        seen.insert(key);
        auto it = items_.find(key);
        if (it != items_.end() &&
            it->second->metadata.resource_version == obj->metadata.resource_version) {
          continue;  // unchanged across the relist
        }
        Ptr old = StoreLocked(key, obj);
        changes.emplace_back(old, obj);
      }
      std::vector<std::string> gone;
      for (const auto& [k, v] : items_) {
        if (!seen.contains(k)) gone.push_back(k);
      }
      for (const std::string& k : gone) changes.emplace_back(StoreLocked(k, nullptr), nullptr);
    }
    for (const auto& [old_obj, new_obj] : changes) Notify(old_obj, new_obj);
    if (!synced_.HasBeenNotified()) synced_.Notify();
  }

  void Apply(WatchEvent&& e) {
    Ptr obj;
    std::string key;
    if (e.type == WatchEvent::Type::kDeleted) {
      // By identity: a deleted object need not decode to be removed.
      key = e.undecodable ? ::dra::k8s::KeyOf(*e.undecodable) : KeyOfIdentity(e.object);
    } else {
      // Not decodable: the last decodable version stays (see the file comment).
      if (e.undecodable) return;
      obj = Decode(e.object);
      if (!obj) return;
      key = KeyOf(*obj);
    }
    Ptr old;
    {
      absl::MutexLock lock(&mu_);
      if (e.type == WatchEvent::Type::kDeleted) {
        if (!items_.contains(key)) return;  // already gone (e.g. removed by a relist)
        old = StoreLocked(key, nullptr);
      } else {
        auto it = items_.find(key);
        if (it != items_.end() &&
            it->second->metadata.resource_version == obj->metadata.resource_version) {
          return;  // a replayed event we already hold
        }
        old = StoreLocked(key, obj);
      }
    }
    Notify(old, obj);
  }

  void Resync() {
    for (const Ptr& obj : List()) Notify(obj, obj);
  }

  const absl::Duration resync_;
  std::vector<Handlers> handlers_;
  std::map<std::string, IndexFunc> index_funcs_;

  absl::Mutex notify_mu_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Ptr> items_ ABSL_GUARDED_BY(mu_);
  // index name -> indexed value -> keys
  std::map<std::string, std::map<std::string, std::set<std::string>>> indices_ ABSL_GUARDED_BY(mu_);

  std::atomic<int64_t> handler_exceptions_{0};
  absl::Notification synced_;
  absl::Notification stop_resync_;
  Reflector reflector_;
  std::thread thread_;
  std::thread resync_thread_;
};

}  // namespace dra::k8s
