// LEB128 varints (7 bits a byte, low bits first, the high bit set on every
// byte but the last) and zigzag signed-to-unsigned mapping: the wire's
// compact messages and compressed store blocks both use them.
#ifndef DMG_COMMON_VARINT_H_
#define DMG_COMMON_VARINT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dmg {

inline uint64_t ZigZag(int64_t x) {
  return (static_cast<uint64_t>(x) << 1) ^ static_cast<uint64_t>(x >> 63);
}
inline int64_t UnZigZag(uint64_t x) {
  return static_cast<int64_t>(x >> 1) ^ -static_cast<int64_t>(x & 1);
}

inline size_t VarintBytes(uint64_t x) {
  size_t n = 1;
  while (x >= 0x80) {
    x >>= 7;
    ++n;
  }
  return n;
}

// Writes x at p; returns the byte after it.
inline uint8_t* PutVarint(uint8_t* p, uint64_t x) {
  while (x >= 0x80) {
    *p++ = static_cast<uint8_t>(x) | 0x80;
    x >>= 7;
  }
  *p++ = static_cast<uint8_t>(x);
  return p;
}

// Reads a varint at p, reading nothing at or past end, into *x and moves p
// past it. False if it runs past end, takes more than max_bytes, or does
// not fit 64 bits.
inline bool GetVarint(const uint8_t*& p, const uint8_t* end, uint64_t* x,
                      int max_bytes = 10) {
  if (p < end && *p < 0x80 && max_bytes > 0) {  // most values: one byte
    *x = *p++;
    return true;
  }
  uint64_t v = 0;
  for (int i = 0; i < max_bytes && i < 10 && p < end; ++i) {
    const uint64_t b = *p++;
    if (i == 9 && b > 1) return false;
    v |= (b & 0x7f) << (7 * i);
    if (b < 0x80) {
      *x = v;
      return true;
    }
  }
  return false;
}

// The same on strings: appends x to out; reads one from the front of in
// and drops it (false: malformed, as GetVarint).
inline void PutVarint(std::string& out, uint64_t x) {
  uint8_t bytes[10];
  out.append(reinterpret_cast<const char*>(bytes), PutVarint(bytes, x) - bytes);
}
inline bool GetVarint(std::string_view& in, uint64_t* x) {
  const auto* p = reinterpret_cast<const uint8_t*>(in.data());
  const auto* begin = p;
  if (!GetVarint(p, p + in.size(), x)) return false;
  in.remove_prefix(p - begin);
  return true;
}

}  // namespace dmg

#endif  // DMG_COMMON_VARINT_H_
