#pragma once

// For tests: the log lines written while a LogCapture is alive.

#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/log.h"

namespace dra::log {

// Collects every line the log writes while alive, in order (each ends in '\n'); from any thread.
// The log has one sink, so one LogCapture at a time; the destructor gives stderr back.
class LogCapture {
 public:
  LogCapture() {
    SetSink([this](std::string_view line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(line);
    });
  }
  // Also sets the verbosity, and restores the one before when destroyed.
  explicit LogCapture(int verbosity) : LogCapture() {
    previous_verbosity_ = Verbosity();
    SetVerbosity(verbosity);
  }
  ~LogCapture() {
    SetSink(nullptr);
    if (previous_verbosity_) SetVerbosity(*previous_verbosity_);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::vector<std::string> Lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  std::string Text() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string all;
    for (const std::string& l : lines_) all += l;
    return all;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.clear();
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
  std::optional<int> previous_verbosity_;
};

}  // namespace dra::log
