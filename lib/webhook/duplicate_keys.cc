#include "lib/webhook/duplicate_keys.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace dra::webhook {
namespace {

// The bytes the scan acts on.
constexpr auto kSignificant = [] {
  std::array<bool, 256> t{};
  for (unsigned char c : {'{', '}', '[', ']', ',', '"'}) t[c] = true;
  return t;
}();

// Keys of one object compared pairwise up to this many; beyond, they go into a hash set, so that
// an object of 300,000 members (a 3 MiB body) costs milliseconds, not minutes of a loop thread.
constexpr size_t kPairwiseKeys = 32;

struct Frame {
  bool is_object = false;
  bool expect_key = false;  // object: the next string is a key
  size_t keys_begin = 0;    // object: its keys are keys[keys_begin..]
  absl::string_view key;    // object: the member being read (raw, between the quotes)
  size_t index = 0;         // array: the element being read
  // object: its unescaped keys, once it has more than kPairwiseKeys.
  std::unique_ptr<absl::flat_hash_set<std::string>> seen;
};

// The JSON-unescaped key (raw keys without a backslash are used as they are).
std::string Unescape(absl::string_view raw) {
  nlohmann::json j = nlohmann::json::parse(absl::StrCat("\"", raw, "\""), nullptr, false);
  return j.is_string() ? j.get<std::string>() : std::string(raw);
}

// The key as compared: unescaped when it has a backslash.
std::string KeyText(absl::string_view raw) {
  return raw.find('\\') == absl::string_view::npos ? std::string(raw) : Unescape(raw);
}

bool SameKey(absl::string_view a, absl::string_view b) {
  if (a == b) return true;
  bool escaped = a.find('\\') != absl::string_view::npos || b.find('\\') != absl::string_view::npos;
  return escaped && Unescape(a) == Unescape(b);
}

void AppendMember(std::string& path, absl::string_view raw_key) {
  std::string key =
      raw_key.find('\\') == absl::string_view::npos ? std::string(raw_key) : Unescape(raw_key);
  bool plain = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
  if (plain) {
    if (!path.empty()) path += '.';
    path += key;
  } else {
    absl::StrAppend(&path, "[\"", absl::CHexEscape(key), "\"]");
  }
}

std::string PathOf(const std::vector<Frame>& frames) {
  std::string path;
  for (const Frame& f : frames) {
    if (f.is_object) {
      AppendMember(path, f.key);
    } else {
      absl::StrAppend(&path, "[", f.index, "]");
    }
  }
  return path;
}

}  // namespace

std::optional<std::string> FindDuplicateKey(absl::string_view json) {
  std::vector<Frame> frames;
  std::vector<absl::string_view> keys;
  frames.reserve(16);
  keys.reserve(64);
  const char* p = json.data();
  const char* end = p + json.size();
  while (p < end) {
    char c = *p;
    switch (c) {
      case '{':
        frames.push_back(Frame{.is_object = true, .expect_key = true, .keys_begin = keys.size()});
        ++p;
        break;
      case '[':
        frames.push_back(Frame{.is_object = false});
        ++p;
        break;
      case '}':
      case ']':
        if (frames.empty()) return std::nullopt;
        if (frames.back().is_object) keys.resize(frames.back().keys_begin);
        frames.pop_back();
        ++p;
        break;
      case ',':
        if (frames.empty()) return std::nullopt;
        if (frames.back().is_object) {
          frames.back().expect_key = true;
        } else {
          ++frames.back().index;
        }
        ++p;
        break;
      case '"': {
        const char* start = ++p;
        // The closing quote: the next '"' not preceded by an odd run of backslashes.
        while (true) {
          p = static_cast<const char*>(std::memchr(p, '"', end - p));
          if (p == nullptr) return std::nullopt;
          const char* b = p;
          while (b > start && b[-1] == '\\') --b;
          if ((p - b) % 2 == 0) break;
          ++p;
        }
        absl::string_view s(start, p - start);
        ++p;
        if (!frames.empty() && frames.back().is_object && frames.back().expect_key) {
          Frame& f = frames.back();
          f.expect_key = false;
          f.key = s;
          if (f.seen == nullptr && keys.size() - f.keys_begin >= kPairwiseKeys) {
            f.seen = std::make_unique<absl::flat_hash_set<std::string>>();
            for (size_t i = f.keys_begin; i < keys.size(); ++i) f.seen->insert(KeyText(keys[i]));
          }
          if (f.seen != nullptr) {
            if (!f.seen->insert(KeyText(s)).second) return PathOf(frames);
            break;
          }
          for (size_t i = f.keys_begin; i < keys.size(); ++i) {
            if (SameKey(keys[i], s)) return PathOf(frames);
          }
          keys.push_back(s);
        }
        break;
      }
      default:
        // Whitespace, ':', numbers, true/false/null: skip to the next byte that matters.
        ++p;
        while (p < end && !kSignificant[static_cast<unsigned char>(*p)]) ++p;
    }
  }
  return std::nullopt;
}

}  // namespace dra::webhook
