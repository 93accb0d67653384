#pragma once

// Crash-safe file replacement: after a crash at any point, `path` holds either the old or the new
// contents in full. Every persistent file of the driver (checkpoint, CDI specs, configs) goes
// through WriteFileAtomically.

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dra {

// Writes `contents` to a temporary file in the directory of `path`, sets its mode to `mode`
// (exactly; the umask does not apply), fsyncs it, renames it over `path` and fsyncs the directory.
// On failure no temporary file is left behind and `path` is untouched (except when only the final
// directory fsync fails: then the new contents are in place but maybe not yet durable). Errors keep
// the errno's code and read "write <path>: <step> <file>: <reason>". A symlink at `path` is
// replaced, not followed. Safe to call from any thread; concurrent writers of one path each
// produce a complete file and the last rename wins.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 mode_t mode = 0644);

struct AtomicWriteOptions {
  mode_t mode = 0644;
  // Keep the replaced file's blocks alive through a hidden hard link (".<name>.tmp.*.old") and
  // free them on a background thread. On ext4 with online discard, freeing a file's blocks costs
  // about a millisecond; this keeps that off the caller's path (prepare latency). A crash may leave
  // the hidden link behind; it matches the temporary-file pattern that owners clean at startup.
  bool release_replaced_in_background = false;
  // fsync the file and its directory. Only state that must survive a power loss needs it; state
  // that a reboot invalidates anyway (a checkpoint keyed to the boot ID) is crash-safe against
  // process death through the rename alone, and skipping the fsyncs saves a journal commit.
  bool durable = true;
};
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 const AtomicWriteOptions& options);

// Blocks until every replaced file handed to the background thread has been unlinked (for tests
// and tools that remove whole directories right after writing).
void WaitForBackgroundUnlinks();

// mkdir -p: creates `dir` and its missing parents with `mode` (existing ones are left alone).
// Errors read "create directory <path>: <reason>"; FailedPrecondition "<dir> is not a directory"
// when something else is in the way.
absl::Status MakeDirectories(const std::string& dir, mode_t mode = 0755);

// The whole file. NotFound when it does not exist; errors read "read <path>: <reason>".
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace dra
