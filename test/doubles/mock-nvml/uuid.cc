#include "test/doubles/mock-nvml/uuid.h"

#include <cstdint>
#include <cstdio>

namespace mock_nvml {
namespace {

uint64_t Fnv1a64(const std::string& s, uint64_t basis) {
  uint64_t h = basis;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string MakeUuid(const std::string& prefix, const std::string& seed) {
  unsigned char b[16];
  const uint64_t hi = Fnv1a64(seed, 0xcbf29ce484222325ULL);
  const uint64_t lo = Fnv1a64(seed + "#", 0x84222325cbf29ce4ULL);
  for (int i = 0; i < 8; ++i) {
    b[i] = static_cast<unsigned char>(hi >> (56 - 8 * i));
    b[8 + i] = static_cast<unsigned char>(lo >> (56 - 8 * i));
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x50);  // version 5
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  char text[37];
  std::snprintf(text, sizeof(text),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return prefix + text;
}

bool ParseUuidBytes(const std::string& text, unsigned char* out16) {
  std::string s = text;
  if (s.rfind("GPU-", 0) == 0 || s.rfind("MIG-", 0) == 0) s = s.substr(4);
  int n = 0;
  int high = -1;
  for (char c : s) {
    if (c == '-') continue;
    const int v = HexValue(c);
    if (v < 0 || n >= 16) return false;
    if (high < 0) {
      high = v;
    } else {
      out16[n++] = static_cast<unsigned char>(high << 4 | v);
      high = -1;
    }
  }
  return n == 16 && high < 0;
}

}  // namespace mock_nvml
