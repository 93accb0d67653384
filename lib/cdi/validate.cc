#include "lib/cdi/validate.h"

#include <cstdint>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "lib/cdi/names.h"
#include "lib/cdi/version.h"
#include "lib/common/status.h"

namespace dra::cdi {
namespace {

constexpr size_t kMaxAnnotationsBytes = size_t{256} * 1024;

absl::Status FieldError(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// True for well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool IsUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (n > s.size() - i - 1) return false;  // truncated sequence
    for (size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

// Every string we write must survive JSON encoding and reach a syscall intact.
absl::Status CheckText(absl::string_view path, absl::string_view value) {
  if (value.find('\0') != absl::string_view::npos) return FieldError(path, "contains a NUL byte");
  if (!IsUtf8(value)) return FieldError(path, "is not valid UTF-8");
  return absl::OkStatus();
}

absl::Status CheckAbsolutePath(absl::string_view path, absl::string_view value) {
  if (value.empty()) return FieldError(path, "required");
  if (value.front() != '/') {
    return FieldError(path, absl::StrCat("must be an absolute path, got \"", value, "\""));
  }
  return CheckText(path, value);
}

absl::Status CheckEnv(const std::string& path, const std::vector<std::string>& env) {
  for (size_t i = 0; i < env.size(); ++i) {
    const std::string p = absl::StrCat(path, "[", i, "]");
    RETURN_IF_ERROR(CheckText(p, env[i]));
    const size_t eq = env[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      return FieldError(p, absl::StrCat("must be KEY=VALUE, got \"", env[i], "\""));
    }
  }
  return absl::OkStatus();
}

bool IsNameChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); }

// Kubernetes QualifiedName: [<DNS-1123 subdomain>/]<name>, name <= 63 characters of
// [A-Za-z0-9-_.] starting and ending alphanumeric. Compared lower-cased, as the CDI parser does.
absl::Status CheckAnnotationKey(absl::string_view path, absl::string_view key) {
  std::string lower = absl::AsciiStrToLower(key);
  absl::string_view name = lower;
  if (size_t slash = name.find('/'); slash != absl::string_view::npos) {
    absl::string_view prefix = name.substr(0, slash);
    name = name.substr(slash + 1);
    bool ok = !prefix.empty() && prefix.size() <= 253 && IsNameChar(prefix.front()) &&
              IsNameChar(prefix.back());
    for (char c : prefix) ok = ok && (IsNameChar(c) || c == '-' || c == '.');
    if (!ok) return FieldError(path, "key prefix must be a DNS subdomain");
  }
  bool ok =
      !name.empty() && name.size() <= 63 && IsNameChar(name.front()) && IsNameChar(name.back());
  for (char c : name) ok = ok && (IsNameChar(c) || c == '-' || c == '_' || c == '.');
  if (!ok) {
    return FieldError(path,
                      "key name must be 1-63 characters of [A-Za-z0-9-_.], starting and ending "
                      "with a letter or digit");
  }
  return absl::OkStatus();
}

absl::Status CheckAnnotations(const std::string& path,
                              const std::map<std::string, std::string>& annotations) {
  size_t total = 0;
  for (const auto& [key, value] : annotations) {
    const std::string p = absl::StrCat(path, "[\"", key, "\"]");
    RETURN_IF_ERROR(CheckText(p, key));
    RETURN_IF_ERROR(CheckText(p, value));
    RETURN_IF_ERROR(CheckAnnotationKey(p, key));
    total += key.size() + value.size();
  }
  if (total > kMaxAnnotationsBytes) {
    return FieldError(path,
                      absl::StrCat("total size ", total, " bytes exceeds ", kMaxAnnotationsBytes));
  }
  return absl::OkStatus();
}

bool IsHookName(absl::string_view name) {
  for (absl::string_view known : {"prestart", "createRuntime", "createContainer", "startContainer",
                                  "poststart", "poststop"}) {
    if (name == known) return true;
  }
  return false;
}

}  // namespace

absl::Status ValidateContainerEdits(const ContainerEdits& edits, const std::string& path) {
  RETURN_IF_ERROR(CheckEnv(absl::StrCat(path, ".env"), edits.env));
  for (size_t i = 0; i < edits.device_nodes.size(); ++i) {
    const DeviceNode& d = edits.device_nodes[i];
    const std::string p = absl::StrCat(path, ".deviceNodes[", i, "]");
    RETURN_IF_ERROR(CheckAbsolutePath(p + ".path", d.path));
    if (!d.host_path.empty()) RETURN_IF_ERROR(CheckAbsolutePath(p + ".hostPath", d.host_path));
    if (!d.type.empty() && d.type != "b" && d.type != "c" && d.type != "u" && d.type != "p") {
      return FieldError(
          p + ".type",
          absl::StrCat("must be one of \"b\", \"c\", \"u\", \"p\" or empty, got \"", d.type, "\""));
    }
    for (char c : d.permissions) {
      if (c != 'r' && c != 'w' && c != 'm') {
        return FieldError(p + ".permissions",
                          absl::StrCat("must be a subset of \"rwm\", got \"", d.permissions, "\""));
      }
    }
  }
  for (size_t i = 0; i < edits.mounts.size(); ++i) {
    const Mount& m = edits.mounts[i];
    const std::string p = absl::StrCat(path, ".mounts[", i, "]");
    RETURN_IF_ERROR(CheckAbsolutePath(p + ".hostPath", m.host_path));
    RETURN_IF_ERROR(CheckAbsolutePath(p + ".containerPath", m.container_path));
    RETURN_IF_ERROR(CheckText(p + ".type", m.type));
    for (size_t k = 0; k < m.options.size(); ++k) {
      RETURN_IF_ERROR(CheckText(absl::StrCat(p, ".options[", k, "]"), m.options[k]));
    }
  }
  for (size_t i = 0; i < edits.hooks.size(); ++i) {
    const Hook& h = edits.hooks[i];
    const std::string p = absl::StrCat(path, ".hooks[", i, "]");
    if (!IsHookName(h.hook_name)) {
      return FieldError(p + ".hookName",
                        absl::StrCat("must be one of prestart, createRuntime, createContainer, "
                                     "startContainer, poststart, poststop; got \"",
                                     h.hook_name, "\""));
    }
    RETURN_IF_ERROR(CheckAbsolutePath(p + ".path", h.path));
    for (size_t k = 0; k < h.args.size(); ++k) {
      RETURN_IF_ERROR(CheckText(absl::StrCat(p, ".args[", k, "]"), h.args[k]));
    }
    RETURN_IF_ERROR(CheckEnv(p + ".env", h.env));
    if (h.timeout && *h.timeout <= 0) {
      return FieldError(p + ".timeout", absl::StrCat("must be positive, got ", *h.timeout));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSpec(const Spec& spec) {
  if (spec.version.empty()) return FieldError("cdiVersion", "required");
  if (!IsKnownVersion(spec.version)) {
    return FieldError("cdiVersion", absl::StrCat("unknown version \"", spec.version, "\""));
  }
  if (absl::Status s = ParseKind(spec.kind).status(); !s.ok()) {
    return FieldError("kind", s.message());
  }
  RETURN_IF_ERROR(CheckAnnotations("annotations", spec.annotations));
  if (spec.devices.empty()) return FieldError("devices", "at least one device is required");
  std::set<std::string> names;
  for (size_t i = 0; i < spec.devices.size(); ++i) {
    const Device& d = spec.devices[i];
    const std::string p = absl::StrCat("devices[", i, "]");
    if (absl::Status s = ValidateDeviceName(d.name); !s.ok()) {
      return FieldError(p + ".name", s.message());
    }
    if (!names.insert(d.name).second) {
      return FieldError(p + ".name", absl::StrCat("duplicate device name \"", d.name, "\""));
    }
    RETURN_IF_ERROR(CheckAnnotations(p + ".annotations", d.annotations));
    if (d.container_edits.empty()) {
      return FieldError(p + ".containerEdits", "a device needs at least one edit");
    }
    RETURN_IF_ERROR(ValidateContainerEdits(d.container_edits, p + ".containerEdits"));
  }
  RETURN_IF_ERROR(ValidateContainerEdits(spec.container_edits, "containerEdits"));
  const RequiredVersion required = MinimumVersion(spec);
  if (CompareVersions(spec.version, required.version) < 0) {
    return FieldError("cdiVersion", absl::StrCat("\"", spec.version,
                                                 "\" is too old for this spec: ", required.reason,
                                                 " needs ", required.version));
  }
  return absl::OkStatus();
}

}  // namespace dra::cdi
