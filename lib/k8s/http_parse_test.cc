// The response parser on well-formed, split and malformed input.

#include "lib/k8s/http_parse.h"

#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::k8s {
namespace {

using ::testing::HasSubstr;

struct Parsed {
  absl::Status status;
  std::string body;
  ResponseParser parser;
};

// Feeds `input` in pieces of `piece` bytes (0: all at once), then Finish() when `eof`.
Parsed Parse(absl::string_view input, size_t piece = 0, bool eof = false, bool head = false) {
  Parsed p{absl::OkStatus(), "", ResponseParser(head)};
  auto sink = [&p](absl::string_view b) {
    p.body.append(b.data(), b.size());
    return true;
  };
  if (piece == 0) piece = input.size() + 1;
  for (size_t i = 0; i < input.size() && p.status.ok(); i += piece) {
    p.status = p.parser.Feed(input.substr(i, piece), sink);
  }
  if (eof && p.status.ok()) p.status = p.parser.Finish();
  return p;
}

constexpr char kLength[] =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n"
    "Retry-After:  3 \r\n\r\n{\"a\":\"xyz\"}";
constexpr char kChunked[] =
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    "5\r\nhello\r\n"
    "1;name=value\r\n,\r\n"
    "A \r\n 0123456\n7\r\n"  // whitespace before the line end, a bare LF inside the data
    "0\r\nX-Trailer: t\r\n\r\n";

TEST(ResponseParserTest, ContentLengthBodyAndHeaders) {
  Parsed p = Parse(kLength);
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_TRUE(p.parser.done());
  EXPECT_TRUE(p.parser.reusable());
  EXPECT_EQ(p.parser.head().code, 200);
  EXPECT_EQ(p.parser.head().Header("content-type"), "application/json");
  EXPECT_EQ(p.parser.head().Header("retry-after"), "3");
  EXPECT_EQ(p.body, "{\"a\":\"xyz\"}");
}

TEST(ResponseParserTest, ChunkedBodyWithExtensionsAndTrailers) {
  Parsed p = Parse(kChunked);
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_TRUE(p.parser.done());
  EXPECT_TRUE(p.parser.reusable());
  EXPECT_EQ(p.body, "hello, 0123456\n7");
}

TEST(ResponseParserTest, EverySplitGivesTheSameResult) {
  for (absl::string_view input : {absl::string_view(kLength), absl::string_view(kChunked)}) {
    std::string want = Parse(input).body;
    for (size_t piece = 1; piece <= 7; ++piece) {
      Parsed p = Parse(input, piece);
      ASSERT_TRUE(p.status.ok()) << piece << ": " << p.status;
      EXPECT_TRUE(p.parser.done()) << piece;
      EXPECT_EQ(p.body, want) << piece;
    }
    // Two pieces, split at every position.
    for (size_t cut = 0; cut <= input.size(); ++cut) {
      Parsed p{absl::OkStatus(), "", ResponseParser()};
      auto sink = [&p](absl::string_view b) {
        p.body.append(b.data(), b.size());
        return true;
      };
      ASSERT_TRUE(p.parser.Feed(input.substr(0, cut), sink).ok()) << cut;
      ASSERT_TRUE(p.parser.Feed(input.substr(cut), sink).ok()) << cut;
      EXPECT_TRUE(p.parser.done()) << cut;
      EXPECT_EQ(p.body, want) << cut;
    }
  }
}

TEST(ResponseParserTest, InterimResponsesAreSkipped) {
  Parsed p =
      Parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}");
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.parser.head().code, 201);
  EXPECT_EQ(p.body, "{}");
}

TEST(ResponseParserTest, ResponsesWithoutBody) {
  Parsed no_content = Parse("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n");
  EXPECT_TRUE(no_content.parser.done());
  EXPECT_TRUE(no_content.parser.reusable());
  Parsed head = Parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", 0, false, true);
  EXPECT_TRUE(head.parser.done());
  Parsed empty = Parse("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  EXPECT_TRUE(empty.parser.done());
  EXPECT_EQ(empty.body, "");
}

TEST(ResponseParserTest, ConnectionReuseRules) {
  EXPECT_FALSE(
      Parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").parser.reusable());
  EXPECT_FALSE(Parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").parser.reusable());
  EXPECT_TRUE(Parse("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n")
                  .parser.reusable());
  // Bytes after the end of the response: the connection's framing cannot be trusted.
  Parsed extra = Parse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab");
  EXPECT_TRUE(extra.parser.done());
  EXPECT_EQ(extra.body, "a");
  EXPECT_EQ(extra.parser.extra_bytes(), 1u);
  EXPECT_FALSE(extra.parser.reusable());
}

TEST(ResponseParserTest, BodyUntilCloseEndsAtFinish) {
  Parsed p = Parse("HTTP/1.1 200 OK\r\n\r\nall of it", 3, /*eof=*/true);
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_TRUE(p.parser.done());
  EXPECT_FALSE(p.parser.reusable());
  EXPECT_EQ(p.body, "all of it");
  // A transfer coding other than chunked is also delimited by the close.
  Parsed gz = Parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxyz", 0, true);
  ASSERT_TRUE(gz.status.ok()) << gz.status;
  EXPECT_EQ(gz.body, "xyz");
}

TEST(ResponseParserTest, TruncatedResponsesAreErrors) {
  Parsed none = Parse("", 0, true);
  EXPECT_EQ(none.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(none.parser.started());
  Parsed in_head = Parse("HTTP/1.1 200 OK\r\nContent-Len", 0, true);
  EXPECT_THAT(std::string(in_head.status.message()), HasSubstr("middle of the response head"));
  EXPECT_TRUE(in_head.parser.started());
  Parsed in_body = Parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0, true);
  EXPECT_THAT(std::string(in_body.status.message()), HasSubstr("after 3 of 10 body bytes"));
  Parsed in_chunk = Parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", 0, true);
  EXPECT_THAT(std::string(in_chunk.status.message()), HasSubstr("inside the chunked body"));
  Parsed no_last_chunk =
      Parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n", 0, true);
  EXPECT_FALSE(no_last_chunk.status.ok());
}

TEST(ResponseParserTest, MalformedResponsesAreErrorsNamingTheProblem) {
  struct Case {
    std::string input;
    std::string error;
  };
  const std::string big_header = "X-Big: " + std::string(ResponseParser::kMaxHeadBytes, 'x');
  const std::vector<Case> cases = {
      {"HTTP/2 200 OK\r\n\r\n", "status line"},
      {"HTTP/1.1 20 OK\r\n\r\n", "status line"},
      {"ICY 200 OK\r\n\r\n", "status line"},
      {"HTTP/1.1 200OK\r\n\r\n", "status line"},
      {"HTTP/1.1 099 Low\r\n\r\n", "out of range"},
      {"HTTP/1.1 101 Switching Protocols\r\n\r\n", "101"},
      {"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", "has no \"name:\""},
      {"HTTP/1.1 200 OK\r\n: empty name\r\n\r\n", "has no \"name:\""},
      {"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", "character not allowed"},
      {"HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n", "folded"},
      {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n", "Content-Length"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", "Content-Length"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "conflicting"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "not hexadecimal"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", "not hexadecimal"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5x\r\n", "not hexadecimal"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n", "too large"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n", "longer than its"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(9000, '1'),
       "chunk size line longer"},
      {"HTTP/1.1 200 OK\r\n" + big_header + "\r\n\r\n", "head longer than"},
  };
  for (const Case& c : cases) {
    for (size_t piece : {0, 1, 5}) {
      Parsed p = Parse(c.input, piece);
      EXPECT_EQ(p.status.code(), absl::StatusCode::kInternal) << c.input.substr(0, 60);
      EXPECT_THAT(std::string(p.status.message()), HasSubstr("malformed HTTP response"));
      EXPECT_THAT(std::string(p.status.message()), HasSubstr(c.error)) << c.input.substr(0, 60);
    }
  }
}

TEST(ResponseParserTest, SinkCanStopTheBody) {
  ResponseParser parser;
  std::string got;
  auto sink = [&](absl::string_view b) {
    got.append(b.data(), b.size());
    return false;
  };
  ASSERT_TRUE(parser.Feed(kChunked, sink).ok());
  EXPECT_TRUE(parser.aborted());
  EXPECT_FALSE(parser.reusable());
  EXPECT_EQ(got, "hello");
}

TEST(ResponseParserTest, RandomGarbageNeverCrashesOrLoops) {
  std::mt19937 rng(42);
  const std::string alphabet = "HTP/1.0 2\r\n:;aZ-fF\t";
  for (int round = 0; round < 2000; ++round) {
    std::string input = round % 2 == 0 ? std::string(kChunked) : std::string(kLength);
    // Mutate a few bytes of a valid response, or make it up entirely.
    if (round % 5 == 0) input.clear();
    size_t len = round % 5 == 0 ? rng() % 200 : 0;
    for (size_t i = 0; i < len; ++i) input += alphabet[rng() % alphabet.size()];
    for (int m = 0; m < 4 && !input.empty(); ++m) {
      input[rng() % input.size()] = static_cast<char>(rng() % 256);
    }
    Parsed p = Parse(input, 1 + rng() % 9, /*eof=*/true);
    if (p.status.ok()) {
      EXPECT_TRUE(p.parser.done());
    }
  }
}

}  // namespace
}  // namespace dra::k8s
