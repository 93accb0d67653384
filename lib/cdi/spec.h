#pragma once

// The Container Device Interface (CDI) spec model, as read by container runtimes (containerd,
// CRI-O) from /etc/cdi and /var/run/cdi, and its JSON codec.
//
// Generic: nothing here knows about NVIDIA. Field names and JSON keys follow the CDI
// specification (tags.cncf.io/container-device-interface, specs-go). Not modelled: intelRdt and
// netDevices (we never emit them; the decoder rejects them as unsupported rather than silently
// dropping them).
//
// Mapping rule: a CDI field that is optional *and* where zero is meaningful (fileMode, uid, gid,
// timeout, major, minor) is a std::optional and is written whenever set; strings and lists are
// omitted from JSON when empty, as the Go structs' `omitempty` does.
//
// We write JSON files (".json"): runtimes accept ".json" and ".yaml" alike, JSON needs no second
// serializer, is a strict subset of YAML (so YAML-only tools read it too) and is what our
// fuzzed decoder parses back.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace dra::cdi {

// A device node to create in the container (and allow in its device cgroup).
struct DeviceNode {
  std::string path;       // path inside the container; required
  std::string host_path;  // path on the host; empty means "same as path" (needs cdiVersion 0.5.0)
  std::string type;       // "", "b", "c", "u" or "p"; empty means "stat host_path"
  std::optional<int64_t> major;
  std::optional<int64_t> minor;
  std::optional<uint32_t> file_mode;  // permission bits for the node the runtime creates
  std::string permissions;            // cgroup access, a subset of "rwm"; empty means "rwm"
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;

  friend bool operator==(const DeviceNode&, const DeviceNode&) = default;
};

// A bind (or other) mount.
struct Mount {
  std::string host_path;       // required
  std::string container_path;  // required
  std::string type;            // needs cdiVersion 0.4.0
  std::vector<std::string> options;

  friend bool operator==(const Mount&, const Mount&) = default;
};

// An OCI hook.
struct Hook {
  std::string hook_name;  // prestart, createRuntime, createContainer, startContainer, poststart,
                          // poststop
  std::string path;       // required
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::optional<int> timeout;  // seconds

  friend bool operator==(const Hook&, const Hook&) = default;
};

// Edits a runtime applies to the OCI spec of a container.
struct ContainerEdits {
  std::vector<std::string> env;  // "KEY=VALUE"
  std::vector<DeviceNode> device_nodes;
  std::vector<Hook> hooks;
  std::vector<Mount> mounts;
  std::vector<uint32_t> additional_gids;  // needs cdiVersion 0.7.0

  bool empty() const {
    return env.empty() && device_nodes.empty() && hooks.empty() && mounts.empty() &&
           additional_gids.empty();
  }
  // Appends every edit of `other` after ours (no de-duplication).
  void Append(const ContainerEdits& other);

  friend bool operator==(const ContainerEdits&, const ContainerEdits&) = default;
};

struct Device {
  std::string name;  // unqualified; the qualified ID is "<kind>=<name>"
  std::map<std::string, std::string> annotations;
  ContainerEdits container_edits;  // must not be empty

  friend bool operator==(const Device&, const Device&) = default;
};

struct Spec {
  std::string version;  // "cdiVersion"
  std::string kind;     // "<vendor>/<class>"
  std::map<std::string, std::string> annotations;
  std::vector<Device> devices;
  ContainerEdits container_edits;  // applied once when any device of the spec is injected

  friend bool operator==(const Spec&, const Spec&) = default;
};

// The JSON form of `spec`, keys in the order of the CDI Go structs. Performs no validation.
nlohmann::ordered_json SpecToJson(const Spec& spec);
// SpecToJson pretty-printed with two-space indent and a trailing newline. Never fails: strings
// that are not valid UTF-8 are written with U+FFFD replacements (Validate rejects them first on
// every write path).
std::string EncodeSpec(const Spec& spec);

// Decodes a CDI spec from JSON text. Strict, like the runtimes' YAML loader: unknown keys, wrong
// JSON types and out-of-range numbers are InvalidArgument errors naming the field path
// ("devices[1].containerEdits.deviceNodes[0].major: expected integer, got string"); malformed
// JSON reports the 0-based byte offset. Does not validate the content (see validate.h). Never
// throws.
absl::StatusOr<Spec> DecodeSpec(absl::string_view json_text);

}  // namespace dra::cdi
