// What compute nodes post to each other in an exchange (cluster.h): plain
// values and arrays packed back to back. Readers check every length: the
// bytes crossed memory nodes that others can reach.
#ifndef DMG_COMPUTE_NODE_MESSAGE_H_
#define DMG_COMPUTE_NODE_MESSAGE_H_

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace dmg::compute {

class MessageWriter {
 public:
  template <typename T>
  void Put(const T& x) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&x), sizeof(T));
  }
  // A count, then the elements.
  template <typename T>
  void PutArray(std::span<const T> xs) {
    static_assert(std::is_trivially_copyable_v<T>);
    Put<uint64_t>(xs.size());
    out_.append(reinterpret_cast<const char*>(xs.data()), xs.size_bytes());
  }
  std::string& bytes() { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class MessageReader {
 public:
  explicit MessageReader(std::string_view bytes) : in_(bytes) {}
  // False (and nothing read) if the message is too short.
  template <typename T>
  bool Get(T* x) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (in_.size() < sizeof(T)) return false;
    std::memcpy(x, in_.data(), sizeof(T));
    in_.remove_prefix(sizeof(T));
    return true;
  }
  // An array written by PutArray: its elements are copied into *out.
  template <typename T, typename Vector>
  bool GetArray(Vector* out) {
    uint64_t n;
    if (!Get(&n) || n > in_.size() / sizeof(T)) return false;
    const size_t at = out->size();
    if (n == 0) return true;  // memcpy from/to nullptr is undefined, even empty
    out->resize(at + n);
    std::memcpy(out->data() + at, in_.data(), n * sizeof(T));
    in_.remove_prefix(n * sizeof(T));
    return true;
  }
  // What is left, for decoders that take it from the front (wire_codec.h).
  std::string_view& rest() { return in_; }
  bool done() const { return in_.empty(); }
  size_t remaining() const { return in_.size(); }

 private:
  std::string_view in_;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_MESSAGE_H_
