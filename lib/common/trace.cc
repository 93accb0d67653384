#include "lib/common/trace.h"

#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/common/log.h"

namespace dra {
namespace {

thread_local CallTrace* current = nullptr;

}  // namespace

CallTrace::CallTrace(const char* message, bool enabled)
    : message_(message),
      enabled_(enabled),
      start_(enabled ? absl::Now() : absl::InfinitePast()),
      outer_(current) {
  if (enabled_) current = this;
}

CallTrace::~CallTrace() {
  if (!enabled_) return;
  current = outer_;
  // One line in klog's key=value form; durations in whole microseconds, so that the line is easy
  // to read and to parse (bench/prepare does).
  std::string line = absl::StrCat(" totalUs=", absl::ToInt64Microseconds(absl::Now() - start_));
  for (const Stage& s : stages_) {
    absl::StrAppend(&line, " ", s.name, "Us=", absl::ToInt64Microseconds(s.total));
    if (s.count > 1) absl::StrAppend(&line, " ", s.name, "N=", s.count);
  }
  for (const auto& [key, value] : notes_) absl::StrAppend(&line, " ", key, "=", value);
  log::internal::Write(log::Severity::kInfo, __FILE__, __LINE__, message_, line);
}

void CallTrace::Note(const char* key, int64_t value) {
  if (enabled_) notes_.emplace_back(key, value);
}

bool CallTrace::Active() { return current != nullptr; }

const char* CallTrace::Intern(const std::string& name) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* names = new std::set<std::string>();  // never destroyed: the pointers stay valid
  absl::MutexLock lock(&mu);
  return names->insert(name).first->c_str();
}

void CallTrace::CountInCurrent(const char* key, int64_t n) {
  CallTrace* t = current;
  if (t == nullptr) return;
  for (auto& [k, v] : t->notes_) {
    if (k == key || std::strcmp(k, key) == 0) {
      v += n;
      return;
    }
  }
  t->notes_.emplace_back(key, n);
}

void CallTrace::AddToCurrent(const char* name, absl::Duration d) {
  CallTrace* t = current;
  if (t == nullptr) return;
  for (Stage& s : t->stages_) {
    if (s.name == name || std::strcmp(s.name, name) == 0) {
      s.total += d;
      ++s.count;
      return;
    }
  }
  t->stages_.push_back({name, d, 1});
}

}  // namespace dra
