#include "lib/common/signals.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra {
namespace {

std::atomic<bool> g_instance_exists{false};

std::string SignalName(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
  }
  return absl::StrCat("signal ", signal);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SignalHandler>> SignalHandler::Start(SignalOptions options) {
  bool expected = false;
  if (!g_instance_exists.compare_exchange_strong(expected, true)) {
    return absl::FailedPreconditionError("a signal handler is already running in this process");
  }
  sigset_t set;
  sigemptyset(&set);
  for (int signal : options.shutdown_signals) {
    if (signal <= 0 || signal >= NSIG || signal == SIGKILL || signal == SIGSTOP ||
        sigaddset(&set, signal) != 0) {
      g_instance_exists = false;
      return absl::InvalidArgumentError(absl::StrCat("cannot handle signal ", signal));
    }
  }
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGUSR2);
  if (int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0) {
    g_instance_exists = false;
    return ErrnoToStatus(rc, "block signals");
  }
  std::unique_ptr<SignalHandler> handler(new SignalHandler(std::move(options), set));
  handler->thread_ = std::thread([h = handler.get()] { h->Loop(); });
  return handler;
}

SignalHandler::SignalHandler(SignalOptions options, sigset_t set)
    : options_(std::move(options)), set_(set) {}

SignalHandler::~SignalHandler() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // A thread-directed signal from the set wakes sigwait; the loop sees stopping_ and returns.
  pthread_kill(thread_.native_handle(), SIGUSR2);
  thread_.join();
  if (shutdown_thread_.joinable()) shutdown_thread_.join();
  g_instance_exists = false;
}

bool SignalHandler::IsShutdownSignal(int signal) const {
  return std::find(options_.shutdown_signals.begin(), options_.shutdown_signals.end(), signal) !=
         options_.shutdown_signals.end();
}

void SignalHandler::Loop() {
  while (true) {
    int signal = 0;
    if (int rc = sigwait(&set_, &signal); rc != 0) {
      DRA_ERROR("sigwait failed", "err", ErrnoToStatus(rc, "sigwait"));
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    if (IsShutdownSignal(signal)) {
      std::vector<std::function<void(int)>> callbacks;
      if (MarkShutdown(signal, &callbacks)) {
        DRA_INFO("received signal, shutting down", "signal", SignalName(signal));
        shutdown_thread_ =
            std::thread([this, signal, cbs = std::move(callbacks)] { RunShutdown(signal, cbs); });
      } else if (options_.exit_on_second_signal) {
        DRA_WARNING("received second signal while shutting down, exiting now", "signal",
                    SignalName(signal));
        ::_exit(1);
      } else {
        DRA_INFO("already shutting down, ignoring signal", "signal", SignalName(signal));
      }
    } else if (signal == SIGUSR2) {
      std::shared_ptr<std::function<void()>> handler;
      {
        absl::MutexLock lock(&mu_);
        handler = usr2_handler_;
      }
      DRA_INFO("received signal", "signal", SignalName(signal), "handled", handler != nullptr);
      if (handler) (*handler)();
    } else {
      DRA_INFO("ignoring signal", "signal", SignalName(signal));
    }
  }
}

bool SignalHandler::MarkShutdown(int signal, std::vector<std::function<void(int)>>* callbacks) {
  absl::MutexLock lock(&mu_);
  if (shutdown_begun_) return false;
  shutdown_begun_ = true;
  shutdown_signal_ = signal;
  callbacks->swap(shutdown_callbacks_);
  return true;
}

void SignalHandler::RunShutdown(int signal,
                                const std::vector<std::function<void(int)>>& callbacks) {
  for (const auto& callback : callbacks) callback(signal);
  shutdown_done_.Notify();
}

void SignalHandler::OnShutdown(std::function<void(int signal)> callback) {
  int signal;
  {
    absl::MutexLock lock(&mu_);
    if (!shutdown_begun_) {
      shutdown_callbacks_.push_back(std::move(callback));
      return;
    }
    signal = shutdown_signal_;
  }
  callback(signal);
}

void SignalHandler::OnUsr2(std::function<void()> handler) {
  auto shared = std::make_shared<std::function<void()>>(std::move(handler));
  absl::MutexLock lock(&mu_);
  usr2_handler_ = std::move(shared);
}

void SignalHandler::RequestShutdown() {
  std::vector<std::function<void(int)>> callbacks;
  if (!MarkShutdown(0, &callbacks)) return;
  DRA_INFO("shutdown requested");
  RunShutdown(0, callbacks);
}

bool SignalHandler::ShutdownRequested() const {
  absl::MutexLock lock(&mu_);
  return shutdown_begun_;
}

void SignalHandler::WaitForShutdown() const { shutdown_done_.WaitForNotification(); }

bool SignalHandler::WaitForShutdown(absl::Duration timeout) const {
  return shutdown_done_.WaitForNotificationWithTimeout(timeout);
}

int SignalHandler::shutdown_signal() const {
  absl::MutexLock lock(&mu_);
  return shutdown_signal_;
}

}  // namespace dra
