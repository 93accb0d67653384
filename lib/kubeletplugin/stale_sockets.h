#pragma once

// Sweeps the sockets that earlier plugin instances left behind in rolling-update mode.
//
// In rolling-update mode every instance names its sockets after its pod UID
// (plugin_server.h), so a new pod never reuses the old pod's paths. An instance that exits
// normally removes its own sockets; one that is killed (SIGKILL, OOM, node crash) cannot, and
// its files stay in the plugin data directory and the kubelet's registry directory. The kubelet's
// plugin watcher keeps trying to register each stale registration socket, and operators see them
// pile up with every killed pod.
//
// A socket is stale when nothing listens on it: a connect() is refused. A socket of an instance
// that still runs (the old pod during a rolling update, which serves until it is told to stop) is
// accepted and kept. A socket created very recently may be between bind() and listen() in another
// instance that starts at the same moment, so only files older than `min_age` are removed.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dra::kubeletplugin {

struct StaleSocketSweep {
  std::string dir;     // directory to scan (not recursive)
  std::string prefix;  // a candidate's file name starts with this ...
  std::string suffix;  // ... and ends with this
  std::string keep;    // full path never touched (this instance's own socket)
  absl::Duration min_age = absl::Seconds(10);
};

// Removes every unix socket in `sweep.dir` whose name matches prefix/suffix, that is not
// `sweep.keep`, is older than `min_age` (by its inode change time) and refuses connections.
// Returns the removed paths. Files that are not sockets are never touched. A directory that
// cannot be read is an error; a single file that vanishes meanwhile is not.
absl::StatusOr<std::vector<std::string>> SweepStaleSockets(const StaleSocketSweep& sweep);

// True when a unix-socket connect() to `path` is refused (ECONNREFUSED): nobody listens.
bool SocketRefusesConnections(const std::string& path);

// True when a unix-socket connect() to `path` succeeds: an instance listens there.
bool SocketAcceptsConnections(const std::string& path);

// The unix sockets in `match.dir` named `match.prefix`...`match.suffix`, other than
// `match.keep`, that accept a connection (`min_age` is not used): the sockets of other running
// instances of the plugin, e.g. the new pod of a surge rollout beside this one. Empty when the
// directory cannot be read.
std::vector<std::string> LiveSockets(const StaleSocketSweep& match);

}  // namespace dra::kubeletplugin
