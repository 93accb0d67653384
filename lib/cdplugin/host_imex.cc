#include "lib/cdplugin/host_imex.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "lib/cdplugin/errors.h"
#include "lib/common/run_program.h"

namespace dra::cdplugin {

HostImex::HostImex(const driverroot::DriverRoot* root, std::string socket_path,
                   absl::Duration timeout)
    : root_(root), socket_path_(std::move(socket_path)), timeout_(timeout) {}

absl::Status HostImex::Check() const {
  absl::StatusOr<std::string> ctl = root_->FindBinary("nvidia-imex-ctl");
  if (!ctl.ok()) {
    return RetryableError(
        absl::StrCat("host-managed IMEX daemon: nvidia-imex-ctl not found in the driver root ",
                     root_->root(), " (", ctl.status().message(), ")"));
  }
  const std::vector<std::string> argv = {*ctl, "-q", absl::StrCat("--u=", SocketPath())};
  absl::StatusOr<ProgramResult> r = RunProgram(argv, {.timeout = timeout_});
  if (!r.ok()) {
    return RetryableError(absl::StrCat("host-managed IMEX daemon: ", r.status().message()));
  }
  const std::string output = absl::StrCat(r->stdout_text, r->stderr_text);
  if (absl::StrContains(output, "READY") && !absl::StrContains(output, "NOT READY")) {
    return absl::OkStatus();
  }
  return RetryableError(absl::StrCat(
      "host-managed IMEX daemon not ready: \"", CommandLine(argv), "\" exited with ", r->exit_code,
      " and printed \"", absl::StripAsciiWhitespace(output),
      "\" (expected READY; is nvidia-imex running on the host with IMEX_CMD_UNIX_DOMAIN_PATH=",
      socket_path_, "?)"));
}

}  // namespace dra::cdplugin
