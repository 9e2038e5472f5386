//===- Fnv128.h - 128-bit FNV-1a content hash -------------------*- C++ -*-===//
//
// Keys caches and fingerprints data (the token cache, a resumed run's
// training data): dependency-free, the same on every platform, and wide
// enough that two inputs never collide by accident. Not a security boundary.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_FNV128_H
#define KILN_SUPPORT_FNV128_H

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

class Fnv128 {
public:
  void bytes(const void *data, size_t n) {
    const unsigned char *p = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < n; ++i)
      hash_ = (hash_ ^ p[i]) * kPrime;
  }
  /// Length-prefixed, so ["ab", "c"] and ["a", "bc"] hash differently.
  void string(std::string_view s) {
    uint64_t n = s.size();
    bytes(&n, sizeof n);
    bytes(s.data(), s.size());
  }
  std::string hex() const {
    return fmt::format("{:016x}{:016x}", uint64_t(hash_ >> 64), uint64_t(hash_));
  }

private:
  using u128 = unsigned __int128;
  static constexpr u128 kPrime = (u128(0x0000000001000000ULL) << 64) | 0x000000000000013BULL;
  u128 hash_ = (u128(0x6c62272e07bb0142ULL) << 64) | 0x62b821756295c58dULL;
};

} // namespace kiln

#endif // KILN_SUPPORT_FNV128_H
