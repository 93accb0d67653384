#pragma once

// Signal handling for daemons, without async-signal-safety worries: the handled signals are
// blocked in every thread and one dedicated thread receives them with sigwait, so callbacks are
// ordinary code.
//
//   int main(int argc, char** argv) {
//     auto signals = dra::SignalHandler::Start();  // before any other thread exists
//     if (!signals.ok()) ...
//     (*signals)->OnShutdown([&](int) { server.Stop(); });
//     (*signals)->OnUsr2([] { DumpThreadStacks(); });
//     (*signals)->WaitForShutdown();
//   }
//
// The first shutdown signal (SIGTERM and SIGINT by default; the Go kubelet plugins also treat
// SIGHUP and SIGQUIT so, which SignalOptions can ask for) runs the shutdown callbacks once, in
// registration order, on a "shutdown" thread (so that the signal thread stays responsive while
// they run), then notifies waiters. A shutdown signal that arrives once shutdown has begun (by a
// signal or RequestShutdown) exits the process at once with status 1, like Kubernetes
// components, unless exit_on_second_signal is false. SIGUSR2 runs the SIGUSR2 handler each time.
// Handled signals that are not shutdown signals (SIGHUP by default) are logged and ignored.

#include <csignal>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace dra {

struct SignalOptions {
  // Signals that start a shutdown. The handled set is these plus SIGHUP and SIGUSR2.
  std::vector<int> shutdown_signals = {SIGTERM, SIGINT};
  bool exit_on_second_signal = true;
};

// Thread-safety: Start from main before any other thread is created (threads inherit the signal
// mask; a thread created earlier would still receive the signals with their default action).
// Everything else may be called from any thread, including from callbacks. At most one instance
// exists at a time. The signals stay blocked after destruction.
class SignalHandler {
 public:
  // Blocks the handled signals in the calling thread and starts the signal thread.
  // FailedPrecondition if another SignalHandler exists.
  static absl::StatusOr<std::unique_ptr<SignalHandler>> Start(SignalOptions options = {});
  // Waits for running shutdown callbacks, then stops the signal thread (without starting a
  // shutdown). Must not be called from a callback.
  ~SignalHandler();
  SignalHandler(const SignalHandler&) = delete;
  SignalHandler& operator=(const SignalHandler&) = delete;

  // Adds a callback run once at shutdown, with the signal number (0 for RequestShutdown). Added
  // after shutdown has begun, it runs at once on the calling thread.
  void OnShutdown(std::function<void(int signal)> callback) ABSL_LOCKS_EXCLUDED(mu_);
  // Sets the SIGUSR2 handler (replacing an earlier one); run on the signal thread.
  void OnUsr2(std::function<void()> handler) ABSL_LOCKS_EXCLUDED(mu_);

  // Starts the shutdown as a shutdown signal would (e.g. after a fatal error in a component);
  // runs the callbacks on the calling thread unless shutdown has already begun.
  void RequestShutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // True once shutdown has begun (callbacks may still be running).
  bool ShutdownRequested() const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until the shutdown callbacks have all run.
  void WaitForShutdown() const;
  // As above with a timeout; returns whether shutdown completed.
  bool WaitForShutdown(absl::Duration timeout) const;
  // The signal that started the shutdown: 0 for RequestShutdown or none yet.
  int shutdown_signal() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit SignalHandler(SignalOptions options, sigset_t set);
  void Loop();
  // Marks the shutdown as begun and hands out the callbacks; false if it had begun already.
  bool MarkShutdown(int signal, std::vector<std::function<void(int)>>* callbacks)
      ABSL_LOCKS_EXCLUDED(mu_);
  void RunShutdown(int signal, const std::vector<std::function<void(int)>>& callbacks);
  bool IsShutdownSignal(int signal) const;

  const SignalOptions options_;
  const sigset_t set_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_begun_ ABSL_GUARDED_BY(mu_) = false;
  int shutdown_signal_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::function<void(int)>> shutdown_callbacks_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<std::function<void()>> usr2_handler_ ABSL_GUARDED_BY(mu_);
  absl::Notification shutdown_done_;
  std::thread thread_;           // the signal thread
  std::thread shutdown_thread_;  // runs the callbacks after a signal; started by thread_ only
};

}  // namespace dra
