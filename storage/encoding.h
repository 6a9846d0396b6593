// Little-endian binary encoding of the values stored in RocksDB. Readers are
// bounds-checked and throw CorruptValue instead of reading past the end.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace lookalike {
namespace encoding {

static_assert(sizeof(float) == 4, "float must be IEEE-754 binary32");

// Thrown when a stored value is shorter or otherwise not what its key says.
class CorruptValue : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void PutFixed32(std::string* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(b, 4);
}
inline void PutFixed64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(b, 8);
}
inline void PutFloat(std::string* out, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  PutFixed32(out, bits);
}
// True when the host stores floats and integers little-endian, as the
// on-disk format does: float arrays are then copied as they are.
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
inline constexpr bool kLittleEndianHost = true;
#else
inline constexpr bool kLittleEndianHost = false;
#endif
// n floats, little-endian: one append on a little-endian host.
inline void PutFloats(std::string* out, const float* v, size_t n) {
  if (kLittleEndianHost) {
    out->append(reinterpret_cast<const char*>(v), n * sizeof(float));
    return;
  }
  const size_t at = out->size();
  out->resize(at + n * 4);
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    for (int b = 0; b < 4; ++b)
      (*out)[at + 4 * i + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
  }
}
// n little-endian floats at `raw` into `out`.
inline void GetFloats(const char* raw, size_t n, float* out) {
  if (kLittleEndianHost) {
    std::memcpy(out, raw, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits = 0;
    for (int b = 3; b >= 0; --b) bits = (bits << 8) | static_cast<unsigned char>(raw[4 * i + b]);
    std::memcpy(&out[i], &bits, 4);
  }
}
inline void PutBytes(std::string* out, const std::string& s) {
  PutFixed32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}
// Big-endian 64-bit, for keys: byte order then equals numeric order.
inline std::string BigEndian64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * (7 - i))) & 0xff);
  return s;
}
inline uint64_t ParseBigEndian64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// IEEE-754 binary16 <-> binary32, round to nearest even; used for large
// matrices stored at half precision. Overflow becomes infinity.
inline uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u)  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u));
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520
  if (x < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (x < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t mant = (x & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(x >> 23);  // 14..24 (+ 10-bit target)
    const uint32_t half_mant = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    uint32_t r = half_mant;
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = ((x >> 13) - (112u << 10));  // rebias exponent 127 -> 15
  const uint32_t rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = (uint32_t{h} & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    x = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    x = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      --exp;
    }
    x = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// n floats as little-endian halves (FloatToHalf each), appended to `out`.
inline void PutHalves(std::string* out, const float* v, size_t n) {
  const size_t at = out->size();
  out->resize(at + 2 * n);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = FloatToHalf(v[i]);
    (*out)[at + 2 * i] = static_cast<char>(h & 0xff);
    (*out)[at + 2 * i + 1] = static_cast<char>(h >> 8);
  }
}
// n little-endian halves at `raw` into `out`, through a table of all 65,536
// (fast for the tens of millions of a PCA matrix).
inline void GetHalves(const char* raw, size_t n, float* out) {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = HalfToFloat(static_cast<uint16_t>(h));
    return t;
  }();
  const auto* b = reinterpret_cast<const unsigned char*>(raw);
  for (size_t i = 0; i < n; ++i) out[i] = table[b[2 * i] | (uint32_t{b[2 * i + 1]} << 8)];
}

// Sequential reader over an encoded value.
class Reader {
 public:
  Reader(const char* data, size_t size, const char* what)
      : p_(data), end_(data + size), what_(what) {}
  explicit Reader(const std::string& s, const char* what) : Reader(s.data(), s.size(), what) {}

  uint32_t Fixed32() {
    Need(4);
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p_[i]);
    p_ += 4;
    return v;
  }
  uint64_t Fixed64() {
    Need(8);
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p_[i]);
    p_ += 8;
    return v;
  }
  float Float() {
    const uint32_t bits = Fixed32();
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
  std::string Bytes() {
    const uint32_t n = Fixed32();
    Need(n);
    std::string s(p_, n);
    p_ += n;
    return s;
  }
  const char* Raw(size_t n) {
    Need(n);
    const char* r = p_;
    p_ += n;
    return r;
  }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  void ExpectEnd() const {
    if (p_ != end_)
      throw CorruptValue(std::string(what_) + ": " + std::to_string(remaining()) +
                         " unexpected trailing bytes");
  }

 private:
  void Need(size_t n) const {
    if (static_cast<size_t>(end_ - p_) < n)
      throw CorruptValue(std::string(what_) + ": value truncated");
  }
  const char* p_;
  const char* end_;
  const char* what_;
};

// 64-bit FNV-1a over bytes: identity of codebooks, checksum of the model,
// PCA and search index values, and (schema 1 only) of per-image values and
// file contents; schema 2 uses XXH3-64 for those (Store::hash_kind()).
inline uint64_t Fnv1a64(const void* data, size_t size, uint64_t h = 1469598103934665603ull) {
  const auto* b = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace encoding
}  // namespace lookalike
