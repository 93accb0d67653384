#include "lib/common/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"

namespace dra::log {
namespace {

std::atomic<int> g_verbosity{0};

absl::Mutex g_sink_mu;
Sink* g_sink ABSL_GUARDED_BY(g_sink_mu) = nullptr;

char SeverityLetter(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return 'I';
    case Severity::kWarning:
      return 'W';
    case Severity::kError:
      return 'E';
    case Severity::kFatal:
      return 'F';
  }
  return 'I';
}

const char* BaseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

void SetVerbosity(int level) { g_verbosity.store(level, std::memory_order_relaxed); }
int Verbosity() { return g_verbosity.load(std::memory_order_relaxed); }

void SetSink(Sink sink) {
  absl::MutexLock lock(&g_sink_mu);
  delete g_sink;
  g_sink = sink ? new Sink(std::move(sink)) : nullptr;
}

namespace internal {

void AppendQuoted(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void Write(Severity severity, const char* file, int line, std::string_view msg,
           std::string_view pairs) {
  absl::Time now = absl::Now();
  absl::TimeZone utc = absl::UTCTimeZone();
  std::string out = absl::StrFormat("%c%s %7d %s:%d] ", SeverityLetter(severity),
                                    absl::FormatTime("%m%d %H:%M:%E6S", now, utc),
                                    static_cast<int>(::syscall(SYS_gettid)), BaseName(file), line);
  AppendQuoted(out, msg);
  out.append(pairs.data(), pairs.size());
  out += '\n';
  {
    absl::MutexLock lock(&g_sink_mu);
    if (g_sink != nullptr) {
      (*g_sink)(out);
    } else {
      // One write() per line keeps lines whole across threads and processes.
      ssize_t ignored = ::write(STDERR_FILENO, out.data(), out.size());
      (void)ignored;
    }
  }
  if (severity == Severity::kFatal) std::abort();
}

}  // namespace internal
}  // namespace dra::log
