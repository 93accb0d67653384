#pragma once

// Test-only: builds checkpoint files as the public Go driver writes them, from the format facts
// (docs/checkpoint-format.md, "The public Go driver's checkpoint"): compact JSON in the Go
// structs' field order, "v1" regenerated from "v2", FNV-1a 32 checksums over go-spew's rendering
// "([]uint8)[b0 b1 ...]" of the JSON bytes. The checksum is computed here again, independently of
// go_format.cc, so that the tests do not check the code against itself. Every builder returns
// JSON text.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace dra::checkpoint::testing_go {

inline uint32_t Checksum(absl::string_view json) {
  std::string spew = "([]uint8)[";
  for (size_t i = 0; i < json.size(); ++i) {
    absl::StrAppend(&spew, i == 0 ? "" : " ",
                    static_cast<unsigned int>(static_cast<unsigned char>(json[i])));
  }
  spew += "]";
  uint32_t h = 2166136261u;
  for (unsigned char c : spew) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

inline std::string Quote(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

inline std::string List(const std::vector<std::string>& items, bool quote) {
  std::vector<std::string> parts;
  for (const std::string& i : items) parts.push_back(quote ? Quote(i) : i);
  return absl::StrCat("[", absl::StrJoin(parts, ","), "]");
}

// A device's "device" value (capitalised keys): one request, this claim's CDI device ID.
inline std::string Dev(const std::string& claim_uid, const std::string& device,
                       const std::string& request = "gpu", const std::string& pool = "node1") {
  return absl::StrCat(
      R"({"Requests":)", List({request}, true), R"(,"PoolName":)", Quote(pool), R"(,"DeviceName":)",
      Quote(device), R"(,"CDIDeviceIDs":)",
      List({absl::StrCat("k8s.gpu.nvidia.com/claim=", claim_uid, "-", device)}, true), "}");
}

inline std::string GpuDevice(const std::string& uuid, const std::string& dev) {
  return absl::StrCat(R"({"gpu":{"info":{"uuid":)", Quote(uuid), R"(},"device":)", dev,
                      R"(},"mig":null})");
}

inline std::string MigDevice(unsigned parent_minor, unsigned gi, unsigned ci,
                             const std::string& mig_uuid, const std::string& parent_uuid,
                             const std::string& parent_pci, const std::string& dev) {
  return absl::StrCat(R"({"gpu":null,"mig":{"concrete":{"parentMinor":)", parent_minor,
                      R"(,"giId":)", gi, R"(,"ciId":)", ci, R"(,"migUUID":)", Quote(mig_uuid),
                      R"(,"parentUUID":)", Quote(parent_uuid), R"(,"parentPCIBusID":)",
                      Quote(parent_pci), R"(},"device":)", dev, "}}");
}

// A device group; `config_state` is the JSON object text of "configState" ("{}" for none).
inline std::string Group(const std::vector<std::string>& devices,
                         const std::string& config_state = "{}") {
  return absl::StrCat(R"({"devices":)", List(devices, false), R"(,"configState":)", config_state,
                      "}");
}

// A claim status allocating `devices` (request "gpu", pool "node1"), reserved for one pod.
inline std::string Status(const std::vector<std::string>& devices) {
  std::vector<std::string> results;
  for (const std::string& d : devices) {
    results.push_back(absl::StrCat(R"({"request":"gpu","driver":"gpu.nvidia.com","pool":"node1",)",
                                   R"("device":)", Quote(d), "}"));
  }
  return absl::StrCat(R"({"allocation":{"devices":{"results":)", List(results, false),
                      R"(}},"reservedFor":[{"resource":"pods","name":"p","uid":"pod-1"}]})");
}

// A "v2" claim entry, `"<uid>":{...}`; empty `groups`, `name` and `ns` are left out (omitempty).
inline std::string ClaimV2(const std::string& uid, const std::string& state,
                           const std::string& status, const std::vector<std::string>& groups,
                           const std::string& ns = "", const std::string& name = "") {
  std::string out =
      absl::StrCat(Quote(uid), R"(:{"checkpointState":)", Quote(state), R"(,"status":)", status);
  if (!groups.empty()) absl::StrAppend(&out, R"(,"preparedDevices":)", List(groups, false));
  if (!name.empty()) absl::StrAppend(&out, R"(,"name":)", Quote(name));
  if (!ns.empty()) absl::StrAppend(&out, R"(,"namespace":)", Quote(ns));
  return out + "}";
}

// A "v1" claim entry, `"<uid>":{...}`.
inline std::string ClaimV1(const std::string& uid, const std::string& status,
                           const std::vector<std::string>& groups) {
  return absl::StrCat(Quote(uid), R"(:{"status":)", status, R"(,"preparedDevices":)",
                      List(groups, false), "}");
}

// The "v2" object with its checksum.
inline std::string V2Section(const std::string& boot_id, const std::vector<std::string>& claims) {
  auto text = [&](uint32_t sum) {
    return absl::StrCat(R"({"checksum":)", sum, R"(,"preparedClaims":{)",
                        absl::StrJoin(claims, ","), R"(},"nodeBootID":)", Quote(boot_id), "}");
  };
  return text(Checksum(text(0)));
}

inline std::string V1Section(const std::vector<std::string>& claims) {
  return absl::StrCat(R"({"preparedClaims":{)", absl::StrJoin(claims, ","), "}}");
}

// The file; an empty section is left out. The top-level checksum covers the file without "v2".
inline std::string File(const std::string& v2, const std::string& v1) {
  auto text = [&](uint32_t sum, bool with_v2) {
    std::string out = absl::StrCat(R"({"checksum":)", sum);
    if (!v1.empty()) absl::StrAppend(&out, R"(,"v1":)", v1);
    if (with_v2 && !v2.empty()) absl::StrAppend(&out, R"(,"v2":)", v2);
    return out + "}";
  };
  return text(Checksum(text(0, false)), true);
}

// Conveniences: a completed claim of GPU gpu-0 ("GPU-0000") with time-slicing applied, and a
// claim that only got as far as PrepareStarted (the Go driver records no devices then).
inline std::string GpuGroup(const std::string& uid) {
  return Group({GpuDevice("GPU-0000", Dev(uid, "gpu-0"))}, R"({"timeSliceApplied":true})");
}
inline std::string GpuClaimV2(const std::string& uid, const std::string& state) {
  return ClaimV2(uid, state, Status({"gpu-0"}), {GpuGroup(uid)});
}
inline std::string GpuClaimV1(const std::string& uid) {
  return ClaimV1(uid, Status({"gpu-0"}), {GpuGroup(uid)});
}
inline std::string StartedClaimV2(const std::string& uid, const std::string& ns,
                                  const std::string& name) {
  return ClaimV2(uid, "PrepareStarted", Status({"gpu-1"}), {}, ns, name);
}

}  // namespace dra::checkpoint::testing_go
