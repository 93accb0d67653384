#include "lib/k8s/http_parse.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dra::k8s {
namespace {

absl::Status Malformed(absl::string_view what) {
  return absl::InternalError(absl::StrCat("malformed HTTP response: ", what));
}

// A printable excerpt of protocol text for error messages.
std::string Excerpt(absl::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += absl::ascii_isprint(c) ? c : '?';
  if (s.size() > 40) out += "...";
  return absl::StrCat("\"", out, "\"");
}

bool IsTokenChar(char c) {
  return absl::ascii_isalnum(c) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

}  // namespace

std::string ResponseHead::Header(absl::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return "";
}

absl::Status ResponseParser::TakeLine(absl::string_view& data, size_t limit, bool& complete) {
  size_t nl = data.find('\n');
  size_t take = nl == absl::string_view::npos ? data.size() : nl;
  if (line_.size() + take > limit) {
    return Malformed(absl::StrCat("line longer than ", limit, " bytes"));
  }
  line_.append(data.data(), take);
  if (nl == absl::string_view::npos) {
    data.remove_prefix(data.size());
    complete = false;
    return absl::OkStatus();
  }
  data.remove_prefix(nl + 1);
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  complete = true;
  return absl::OkStatus();
}

absl::Status ResponseParser::OnStatusLine(absl::string_view line) {
  // HTTP/1.x SP 3DIGIT [SP reason-phrase]
  if (line.size() < 12 || !absl::StartsWith(line, "HTTP/1.") || !absl::ascii_isdigit(line[7]) ||
      line[8] != ' ' || !absl::ascii_isdigit(line[9]) || !absl::ascii_isdigit(line[10]) ||
      !absl::ascii_isdigit(line[11]) || (line.size() > 12 && line[12] != ' ')) {
    return Malformed(
        absl::StrCat("status line ", Excerpt(line), " is not \"HTTP/1.x NNN reason\""));
  }
  head_.minor_version = line[7] - '0';
  head_.code = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
  if (head_.code < 100) {
    return Malformed(absl::StrCat("status code ", head_.code, " is out of range 100-999"));
  }
  return absl::OkStatus();
}

absl::Status ResponseParser::OnHeaderLine(absl::string_view line) {
  if (line[0] == ' ' || line[0] == '\t') {
    return Malformed(
        absl::StrCat("folded header line ", Excerpt(line), " (obsolete, not allowed)"));
  }
  size_t colon = line.find(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return Malformed(absl::StrCat("header line ", Excerpt(line), " has no \"name:\""));
  }
  absl::string_view name = line.substr(0, colon);
  for (char c : name) {
    if (!IsTokenChar(c)) {
      return Malformed(absl::StrCat("header name ", Excerpt(name), " has a character not allowed"));
    }
  }
  head_.headers.emplace_back(absl::AsciiStrToLower(name),
                             std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
  return absl::OkStatus();
}

absl::Status ResponseParser::OnHeadEnd() {
  if (head_.code < 200) {
    if (head_.code == 101) return Malformed("unexpected 101 Switching Protocols");
    head_ = ResponseHead();  // an interim response (100 Continue, 103 Early Hints): skip it
    state_ = State::kStatusLine;
    return absl::OkStatus();
  }
  bool chunked = false, has_te = false, has_length = false;
  uint64_t length = 0;
  keep_alive_ = head_.minor_version >= 1;
  for (const auto& [name, value] : head_.headers) {
    if (name == "connection") {
      for (absl::string_view token : absl::StrSplit(value, ',')) {
        std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(token));
        if (t == "close") keep_alive_ = false;
        if (t == "keep-alive" && head_.minor_version == 0) keep_alive_ = true;
      }
    } else if (name == "transfer-encoding") {
      has_te = true;
      std::string last;
      for (absl::string_view token : absl::StrSplit(value, ',')) {
        last = absl::AsciiStrToLower(absl::StripAsciiWhitespace(token));
      }
      chunked = last == "chunked";
    } else if (name == "content-length") {
      uint64_t v = 0;
      bool digits = !value.empty() && value.size() <= 18 &&
                    std::all_of(value.begin(), value.end(), absl::ascii_isdigit);
      if (!digits || !absl::SimpleAtoi(value, &v)) {
        return Malformed(absl::StrCat("Content-Length ", Excerpt(value),
                                      " is not a decimal number of at most 18 digits"));
      }
      if (has_length && v != length) {
        return Malformed(absl::StrCat("conflicting Content-Length values ", length, " and ", v));
      }
      has_length = true;
      length = v;
    }
  }
  if (head_request_ || head_.code == 204 || head_.code == 304) {
    state_ = State::kDone;
  } else if (has_te) {
    // Transfer-Encoding wins over Content-Length; a body not ending in chunked lasts until close.
    state_ = chunked ? State::kChunkSize : State::kUntilClose;
    if (has_length || !chunked) keep_alive_ = false;
  } else if (has_length) {
    remaining_ = length;
    state_ = length == 0 ? State::kDone : State::kBody;
  } else {
    state_ = State::kUntilClose;
    keep_alive_ = false;
  }
  return absl::OkStatus();
}

absl::Status ResponseParser::OnChunkSizeLine(absl::string_view line) {
  // chunk-size [; extensions]; whitespace before the extensions is tolerated.
  size_t i = 0;
  uint64_t size = 0;
  while (i < line.size() && absl::ascii_isxdigit(line[i])) {
    if (i >= 15) return Malformed(absl::StrCat("chunk size ", Excerpt(line), " is too large"));
    char c = absl::ascii_tolower(line[i]);
    size = size * 16 + (absl::ascii_isdigit(c) ? c - '0' : c - 'a' + 10);
    ++i;
  }
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(line.substr(i));
  if (i == 0 || (!rest.empty() && rest[0] != ';')) {
    return Malformed(absl::StrCat("chunk size line ", Excerpt(line), " is not hexadecimal"));
  }
  if (size == 0) {
    state_ = State::kTrailers;
  } else {
    remaining_ = size;
    state_ = State::kChunkData;
  }
  return absl::OkStatus();
}

bool ResponseParser::Deliver(absl::string_view bytes, const BodySink& sink) {
  body_bytes_ += bytes.size();
  if (bytes.empty() || !sink) return true;
  if (!sink(bytes)) {
    aborted_ = true;
    return false;
  }
  return true;
}

absl::Status ResponseParser::Feed(absl::string_view data, const BodySink& sink) {
  bytes_seen_ += data.size();
  bool complete = false;
  while (!data.empty() && !aborted_) {
    switch (state_) {
      case State::kStatusLine:
      case State::kHeaders: {
        size_t before = data.size();
        absl::Status s = TakeLine(data, kMaxHeadBytes, complete);
        head_bytes_ += before - data.size();
        if (!s.ok() || head_bytes_ > kMaxHeadBytes) {
          return Malformed(absl::StrCat("response head longer than ", kMaxHeadBytes, " bytes"));
        }
        if (!complete) break;
        std::string line = std::move(line_);
        line_.clear();
        if (state_ == State::kStatusLine) {
          if (line.empty()) break;  // stray line ends before the status line are tolerated
          if (absl::Status st = OnStatusLine(line); !st.ok()) return st;
          state_ = State::kHeaders;
        } else if (line.empty()) {
          if (absl::Status st = OnHeadEnd(); !st.ok()) return st;
        } else if (absl::Status st = OnHeaderLine(line); !st.ok()) {
          return st;
        }
        break;
      }
      case State::kBody:
      case State::kChunkData: {
        size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size()));
        absl::string_view piece = data.substr(0, n);
        data.remove_prefix(n);
        remaining_ -= n;
        if (remaining_ == 0) state_ = state_ == State::kBody ? State::kDone : State::kChunkDataEnd;
        Deliver(piece, sink);
        break;
      }
      case State::kUntilClose:
        Deliver(data, sink);
        data.remove_prefix(data.size());
        break;
      case State::kChunkSize:
        if (absl::Status s = TakeLine(data, kMaxLineBytes, complete); !s.ok()) {
          return Malformed(absl::StrCat("chunk size line longer than ", kMaxLineBytes, " bytes"));
        }
        if (complete) {
          std::string line = std::move(line_);
          line_.clear();
          if (absl::Status st = OnChunkSizeLine(line); !st.ok()) return st;
        }
        break;
      case State::kChunkDataEnd:
        // Only the line end may follow a chunk's data.
        if (absl::Status s = TakeLine(data, 1, complete); !s.ok() || (complete && !line_.empty())) {
          return Malformed("chunk data is longer than its declared size");
        }
        if (complete) state_ = State::kChunkSize;
        break;
      case State::kTrailers:
        if (absl::Status s = TakeLine(data, kMaxLineBytes, complete); !s.ok()) {
          return Malformed(absl::StrCat("trailer line longer than ", kMaxLineBytes, " bytes"));
        }
        if (complete) {
          bool end = line_.empty();
          line_.clear();
          if (end) state_ = State::kDone;
        }
        break;
      case State::kDone:
        extra_bytes_ += data.size();
        data.remove_prefix(data.size());
        break;
    }
  }
  return absl::OkStatus();
}

absl::Status ResponseParser::Finish() {
  switch (state_) {
    case State::kDone:
      return absl::OkStatus();
    case State::kUntilClose:
      state_ = State::kDone;
      return absl::OkStatus();
    case State::kStatusLine:
      if (bytes_seen_ == 0) {
        return absl::UnavailableError("connection closed before any response arrived");
      }
      [[fallthrough]];
    case State::kHeaders:
      return Malformed("connection closed in the middle of the response head");
    case State::kBody:
      return Malformed(absl::StrCat("connection closed after ", body_bytes_, " of ",
                                    body_bytes_ + remaining_, " body bytes"));
    default:
      return Malformed(
          absl::StrCat("connection closed inside the chunked body after ", body_bytes_, " bytes"));
  }
}

}  // namespace dra::k8s
