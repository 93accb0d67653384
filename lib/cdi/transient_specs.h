#pragma once

// Transient (per-claim) CDI spec files in a runtime-watched directory such as /var/run/cdi: one
// file per ID, named "<vendor>-<class>_<id>.json", written atomically so that a runtime watching
// the directory never reads a partial file.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/cdi/names.h"
#include "lib/cdi/spec.h"

namespace dra::cdi {

// "<vendor>-<class>_<id>" with every '/' of `id` replaced by '_' (no extension).
std::string TransientSpecName(const Kind& kind, absl::string_view id);

struct TransientSpecFile {
  std::string id;    // as it appears in the file name ('/' already replaced by '_')
  std::string path;  // "<dir>/<name>.json" (or ".yaml", see List)
};

// The transient specs of one kind in one directory.
//
// Thread-safety: all methods may be called concurrently; writes of different IDs are independent
// and concurrent writes of one ID each leave a complete file (the last one wins). Callers that
// need ordering per ID (prepare vs unprepare of one claim) serialize it themselves.
class TransientSpecDir {
 public:
  // `dir` is created (mode 0755, with parents) when missing. `kind` is "<vendor>/<class>".
  static absl::StatusOr<std::unique_ptr<TransientSpecDir>> Create(std::string dir,
                                                                  absl::string_view kind);

  const std::string& dir() const { return dir_; }
  const Kind& kind() const { return kind_; }
  // "<dir>/<vendor>-<class>_<id>.json".
  std::string PathFor(absl::string_view id) const;

  // Whether writes fsync the file and the directory: not on tmpfs (found with statfs at Create),
  // whose contents a power loss takes anyway (/var/run/cdi is tmpfs on most nodes), so a sync
  // there buys nothing and costs prepare latency. Either way the rename makes a write atomic.
  bool durable() const { return durable_; }

  // Writes `spec` for `id` atomically with mode 0644 and returns the path. spec.kind must be this
  // directory's kind; an empty spec.version is set to MinimumVersion(spec); the spec must pass
  // ValidateSpec (nothing is written otherwise). A ".yaml" file for the same ID (as the Go driver
  // wrote) is removed afterwards: two files defining the same device in one directory make the
  // runtime drop the device.
  absl::StatusOr<std::string> Write(absl::string_view id, Spec spec) const;

  // Removes the spec file of `id` (".json" and a legacy ".yaml"). Idempotent: a missing file is
  // success.
  absl::Status Remove(absl::string_view id) const;

  // The spec files of this kind, sorted by path: regular files named
  // "<vendor>-<class>_<id>.json" or ".yaml" (the latter left by the Go driver), for cleanup of
  // IDs no longer prepared. Hidden files (in-flight temporary files) are skipped.
  absl::StatusOr<std::vector<TransientSpecFile>> List() const;

  // Removes temporary files of this kind left by a writer that died between creating and renaming
  // them; returns how many. REQUIRES: no Write of this kind is in flight (in any process).
  absl::StatusOr<int> RemoveTemporaryFiles() const;

 private:
  TransientSpecDir(std::string dir, Kind kind, bool durable)
      : dir_(std::move(dir)), kind_(std::move(kind)), durable_(durable) {}

  std::string dir_;
  Kind kind_;
  bool durable_ = true;
};

}  // namespace dra::cdi
