#include "lib/webhook/review_scan.h"

#include <array>
#include <cstring>
#include <string>
#include <vector>

namespace dra::webhook {
namespace {

// Deeper text is left to the full parser (which has no depth limit of its own).
constexpr int kMaxDepth = 256;
// An integer part this long cannot overflow a double; longer ones are left to the full parser.
constexpr ptrdiff_t kMaxIntegerDigits = 300;
// Members of one object compared pairwise for duplicates; larger objects are left to the full
// parser and FindDuplicateKey.
constexpr size_t kMaxMembers = 64;

// The members looked up, as a tree: each entry is a key under its parent entry (-1: the root
// object). An entry's position is the index of its field in Spans.
struct Member {
  const char* key;
  int parent;
};
enum : int {
  kApiVersion,
  kKind,
  kRequest,
  kUid,
  kOperation,
  kResource,
  kGroup,
  kVersion,
  kResourceName,
  kObject,
  kSpec,
  kDevices,
  kConfig,
  kTemplateSpec,
  kTemplateDevices,
  kTemplateConfig,
  kMemberCount,
};
constexpr Member kMembers[kMemberCount] = {
    {"apiVersion", -1},
    {"kind", -1},
    {"request", -1},
    {"uid", kRequest},
    {"operation", kRequest},
    {"resource", kRequest},
    {"group", kResource},
    {"version", kResource},
    {"resource", kResource},
    {"object", kRequest},
    {"spec", kObject},
    {"devices", kSpec},
    {"config", kDevices},
    {"spec", kSpec},
    {"devices", kTemplateSpec},
    {"config", kTemplateDevices},
};
// The entry -1 stands for the root; kNone for a value nobody looks into.
constexpr int kRoot = -1;
constexpr int kNone = -2;

// Bytes a string may hold as they are: printable ASCII but '"' and '\\'.
constexpr auto kPlain = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x80; ++c) t[c] = c != '"' && c != '\\';
  return t;
}();

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class Scanner {
 public:
  explicit Scanner(absl::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  bool Document(absl::string_view* root) {
    SkipSpace();
    const char* start = p_;
    if (!Value(kRoot, 0)) return false;
    *root = absl::string_view(start, p_ - start);
    SkipSpace();
    return p_ == end_;
  }

  const std::array<absl::string_view, kMemberCount>& spans() const { return spans_; }

 private:
  void SkipSpace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  // The member `key` of the object `parent` (kRoot or an entry), or kNone.
  static int Child(int parent, absl::string_view key) {
    if (parent == kNone) return kNone;
    for (int i = 0; i < kMemberCount; ++i) {
      if (kMembers[i].parent == parent && key == kMembers[i].key) return i;
    }
    return kNone;
  }

  // One value at p_ (after whitespace); `entry` is the member it is the value of, or kNone/kRoot.
  bool Value(int entry, int depth) {
    SkipSpace();
    if (p_ == end_) return false;
    const char* start = p_;
    bool ok = false;
    switch (*p_) {
      case '{':
        ok = Object(entry, depth + 1);
        break;
      case '[':
        ok = Array(depth + 1);
        break;
      case '"': {
        bool escaped = false;
        absl::string_view unused;
        ok = String(&unused, &escaped);
        break;
      }
      case 't':
        ok = Literal("true");
        break;
      case 'f':
        ok = Literal("false");
        break;
      case 'n':
        ok = Literal("null");
        break;
      default:
        ok = Number();
    }
    if (ok && entry >= 0) spans_[entry] = absl::string_view(start, p_ - start);
    return ok;
  }

  bool Object(int entry, int depth) {
    if (depth > kMaxDepth) return false;
    ++p_;  // '{'
    SkipSpace();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      return true;
    }
    const size_t keys_begin = keys_.size();
    while (true) {
      SkipSpace();
      if (p_ == end_ || *p_ != '"') return false;
      absl::string_view key;
      bool escaped = false;
      if (!String(&key, &escaped)) return false;
      // Keys are compared as raw text, so one with an escape could equal another unnoticed.
      if (escaped || keys_.size() - keys_begin >= kMaxMembers) return false;
      for (size_t i = keys_begin; i < keys_.size(); ++i) {
        if (keys_[i] == key) return false;  // a duplicate: FindDuplicateKey names it
      }
      keys_.push_back(key);
      SkipSpace();
      if (p_ == end_ || *p_ != ':') return false;
      ++p_;
      if (!Value(Child(entry, key), depth)) return false;
      SkipSpace();
      if (p_ == end_) return false;
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ != '}') return false;
      ++p_;
      keys_.resize(keys_begin);
      return true;
    }
  }

  bool Array(int depth) {
    if (depth > kMaxDepth) return false;
    ++p_;  // '['
    SkipSpace();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    while (true) {
      if (!Value(kNone, depth)) return false;
      SkipSpace();
      if (p_ == end_) return false;
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ != ']') return false;
      ++p_;
      return true;
    }
  }

  // p_ at the opening quote. Sets *contents to the raw text between the quotes.
  bool String(absl::string_view* contents, bool* escaped) {
    const char* start = ++p_;
    while (true) {
      while (p_ < end_ && kPlain[static_cast<unsigned char>(*p_)]) ++p_;
      if (p_ == end_) return false;
      unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        *contents = absl::string_view(start, p_ - start);
        ++p_;
        return true;
      }
      if (c == '\\') {
        *escaped = true;
        if (end_ - p_ < 2) return false;
        switch (p_[1]) {
          case '"':
          case '\\':
          case '/':
          case 'b':
          case 'f':
          case 'n':
          case 'r':
          case 't':
            p_ += 2;
            continue;
          default:
            return false;  // \u (left to the full parser) or not an escape
        }
      }
      if (c < 0x80) return false;  // a control character
      if (!Utf8Sequence()) return false;
    }
  }

  // p_ at a byte >= 0x80: one well-formed UTF-8 sequence (RFC 3629: no overlong forms, no
  // surrogates, at most U+10FFFF), as nlohmann's lexer requires.
  bool Utf8Sequence() {
    auto at = [this](ptrdiff_t i) { return static_cast<unsigned char>(p_[i]); };
    auto in = [](unsigned char c, unsigned char lo, unsigned char hi) {
      return c >= lo && c <= hi;
    };
    unsigned char c = at(0);
    ptrdiff_t left = end_ - p_;
    int n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
    if (in(c, 0xC2, 0xDF)) {
      n = 2;
    } else if (c == 0xE0) {
      n = 3;
      lo = 0xA0;
    } else if (in(c, 0xE1, 0xEC) || in(c, 0xEE, 0xEF)) {
      n = 3;
    } else if (c == 0xED) {
      n = 3;
      hi = 0x9F;
    } else if (c == 0xF0) {
      n = 4;
      lo = 0x90;
    } else if (in(c, 0xF1, 0xF3)) {
      n = 4;
    } else if (c == 0xF4) {
      n = 4;
      hi = 0x8F;
    } else {
      return false;
    }
    if (left < n || !in(at(1), lo, hi)) return false;
    for (int i = 2; i < n; ++i) {
      if (!in(at(i), 0x80, 0xBF)) return false;
    }
    p_ += n;
    return true;
  }

  bool Number() {
    const char* start = p_;
    if (*p_ == '-') ++p_;
    if (p_ == end_) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (*p_ >= '1' && *p_ <= '9') {
      while (p_ < end_ && IsDigit(*p_)) ++p_;
    } else {
      return false;
    }
    if (p_ - start > kMaxIntegerDigits) return false;
    if (p_ < end_ && *p_ == '.') {
      ++p_;
      if (p_ == end_ || !IsDigit(*p_)) return false;
      while (p_ < end_ && IsDigit(*p_)) ++p_;
    }
    // An exponent may overflow a double, which nlohmann refuses: left to it.
    return p_ == end_ || (*p_ != 'e' && *p_ != 'E');
  }

  bool Literal(const char* word) {
    size_t n = std::strlen(word);
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, word, n) != 0) return false;
    p_ += n;
    return true;
  }

  const char* p_;
  const char* const end_;
  std::array<absl::string_view, kMemberCount> spans_{};
  std::vector<absl::string_view> keys_;  // of the objects being read, outermost first
};

}  // namespace

std::optional<ReviewScan> ScanReview(absl::string_view json) {
  Scanner scanner(json);
  ReviewScan s;
  if (!scanner.Document(&s.root)) return std::nullopt;
  const auto& v = scanner.spans();
  s.api_version = v[kApiVersion];
  s.kind = v[kKind];
  s.request = v[kRequest];
  s.uid = v[kUid];
  s.operation = v[kOperation];
  s.resource = v[kResource];
  s.group = v[kGroup];
  s.version = v[kVersion];
  s.resource_name = v[kResourceName];
  s.object = v[kObject];
  s.spec = v[kSpec];
  s.devices = v[kDevices];
  s.config = v[kConfig];
  s.template_spec = v[kTemplateSpec];
  s.template_devices = v[kTemplateDevices];
  s.template_config = v[kTemplateConfig];
  return s;
}

std::string JsonStringValue(absl::string_view raw) {
  if (raw.size() < 2 || raw.front() != '"' || raw.back() != '"') return "";
  raw = raw.substr(1, raw.size() - 2);
  if (raw.find('\\') == absl::string_view::npos) return std::string(raw);
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '\\' || i + 1 == raw.size()) {
      out.push_back(raw[i]);
      continue;
    }
    switch (raw[++i]) {
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      default:  // '"', '\\', '/'
        out.push_back(raw[i]);
    }
  }
  return out;
}

}  // namespace dra::webhook
