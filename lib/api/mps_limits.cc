#include "lib/api/mps_limits.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/api/errors.h"
#include "lib/api/strict_json.h"

namespace dra::api {
namespace {

constexpr int64_t kBytesPerMiB = int64_t{1024} * 1024;

// strconv.Atoi on a 64-bit platform: optional '+' or '-', then one or more ASCII digits, in range.
std::optional<int64_t> GoAtoi(absl::string_view s) {
  absl::string_view digits = s;
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) digits.remove_prefix(1);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c));
      })) {
    return std::nullopt;
  }
  int64_t value = 0;
  // SimpleAtoi accepts the same sign and digits here, and fails on overflow.
  if (!absl::SimpleAtoi(s, &value)) return std::nullopt;
  return value;
}

}  // namespace

int64_t QuantityToMiB(const k8s::Quantity& q) {
  // C++ integer division truncates toward zero, as Go's does.
  return q.Value() / kBytesPerMiB;
}

std::string FormatMiB(int64_t mib) { return absl::StrCat(mib, "M"); }

absl::StatusOr<std::map<std::string, int64_t>> ResolvePinnedMemoryLimits(
    const MpsConfig& mps, std::vector<std::string> group_uuids, absl::string_view mps_path) {
  std::sort(group_uuids.begin(), group_uuids.end());
  group_uuids.erase(std::unique(group_uuids.begin(), group_uuids.end()), group_uuids.end());

  std::map<std::string, int64_t> limits;
  if (mps.default_pinned_device_memory_limit.has_value() && !group_uuids.empty()) {
    const k8s::Quantity& q = *mps.default_pinned_device_memory_limit;
    int64_t mib = QuantityToMiB(q);
    if (mib <= 0) {
      return ConfigError(internal::MemberPath(mps_path, "defaultPinnedDeviceMemoryLimit"),
                         absl::StrCat("invalid limit: default value set too low: ", q.ToString()));
    }
    for (const std::string& uuid : group_uuids) limits[uuid] = mib;
  }

  // Which key set each device, to report two keys naming one device with different limits.
  std::map<std::string, std::string> set_by;
  const std::string map_path = internal::MemberPath(mps_path, "defaultPerDevicePinnedMemoryLimit");
  for (const auto& [key, q] : mps.default_per_device_pinned_memory_limit) {
    const std::string path = internal::EntryPath(map_path, key);
    std::string uuid;
    if (std::binary_search(group_uuids.begin(), group_uuids.end(), key)) {
      uuid = key;
    } else {
      std::optional<int64_t> index = GoAtoi(key);
      if (!index.has_value()) {
        return ConfigError(
            path, absl::StrCat("invalid device: unable to parse key as an integer: ", key));
      }
      if (*index < 0 || *index >= static_cast<int64_t>(group_uuids.size())) {
        return ConfigError(path, absl::StrCat("invalid device: invalid device index: ", *index));
      }
      uuid = group_uuids[static_cast<size_t>(*index)];
    }
    int64_t mib = QuantityToMiB(q);
    if (mib <= 0) {
      return ConfigError(
          path, absl::StrCat("invalid limit: value set too low: ", key, ": ", q.ToString()));
    }
    auto [it, inserted] = set_by.emplace(uuid, key);
    if (!inserted && limits[uuid] != mib) {
      return ConfigError(path, absl::StrCat("device ", uuid, " already has limit ",
                                            FormatMiB(limits[uuid]), " from key \"", it->second,
                                            "\"; one device must not get two different limits"));
    }
    limits[uuid] = mib;
  }
  return limits;
}

}  // namespace dra::api
