#include "lib/gpuplugin/timeslicing/nvidia_smi.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "lib/common/status.h"

namespace dra::gpu {
namespace {

// The last `max` bytes of `text`, trimmed, on one line.
std::string Tail(absl::string_view text, size_t max = 512) {
  text = absl::StripAsciiWhitespace(text);
  std::string out(text.size() > max ? text.substr(text.size() - max) : text);
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> NvidiaSmi::Run(const std::vector<std::string>& args,
                                           const Deadline& deadline) const {
  absl::StatusOr<std::string> smi = root_->FindBinary("nvidia-smi");
  if (!smi.ok()) return Annotate(smi.status(), "find nvidia-smi in the driver root");
  absl::StatusOr<std::string> nvml = root_->FindLibrary("libnvidia-ml.so.1");
  if (!nvml.ok()) return Annotate(nvml.status(), "find libnvidia-ml.so.1 in the driver root");
  std::vector<std::string> argv = {*smi};
  argv.insert(argv.end(), args.begin(), args.end());
  RETURN_IF_ERROR(deadline.Check(absl::StrCat("run \"", CommandLine(argv), "\"")));
  ASSIGN_OR_RETURN(ProgramResult r, RunProgram(argv, {.env = {{"LD_PRELOAD", *nvml}},
                                                      .timeout = deadline.Cap(timeout_)}));
  if (r.exit_code == 0) return r.stdout_text;
  const bool use_stderr = !absl::StripAsciiWhitespace(r.stderr_text).empty();
  std::string how = r.signal != 0 ? absl::StrCat("was killed by signal ", r.signal)
                                  : absl::StrCat("failed with exit code ", r.exit_code);
  return absl::InternalError(absl::StrCat("command \"", CommandLine(argv), "\" ", how, ": ",
                                          use_stderr ? "" : "(stdout) ",
                                          Tail(use_stderr ? r.stderr_text : r.stdout_text)));
}

}  // namespace dra::gpu
