// Reads a whole input file into memory, transparently decompressing gzip and
// xz (detected by magic bytes, not by name).
#ifndef DMG_STORE_INPUT_FILE_H_
#define DMG_STORE_INPUT_FILE_H_

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dmg::store {

// The most bytes an input may take in memory, and the flag that sets it.
struct InputBound {
  uint64_t max_bytes = std::numeric_limits<uint64_t>::max();
  // Said after the flag in a refusal: how the bound was chosen when the
  // flag was not given ("the default: half of the 3.0 GiB left by
  // MemAvailable"); "" when it was.
  std::string origin;
};

// The bytes of an input: anonymous memory grown in place (mremap), so an
// output of unknown size grows without ever holding two copies (a
// std::string holds the old and the new buffer while it grows: near the
// bound that is twice the bound) and pages past what was written are never
// touched.
class InputText {
 public:
  InputText() = default;
  InputText(InputText&& other) noexcept;
  InputText& operator=(InputText&& other) noexcept;
  InputText(const InputText&) = delete;
  InputText& operator=(const InputText&) = delete;
  ~InputText();

  // Room for at least `capacity` bytes, those written kept; false when the
  // memory cannot be mapped.
  bool Reserve(size_t capacity);
  char* data() { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  void set_size(size_t size) { size_ = size; }  // at most capacity()
  bool empty() const { return size_ == 0; }
  absl::string_view view() const { return {data_, size_}; }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// Returns the (decompressed) bytes of `path`. Errors name the file: missing,
// unreadable, empty, or a corrupt/truncated compressed stream; a file, or
// what it decompresses to, larger than bound.max_bytes (InvalidArgument
// naming --max_input_bytes: found before more than the bound is allocated,
// so a gzip bomb costs at most the bound).
absl::StatusOr<InputText> ReadInputFile(const std::string& path,
                                        const InputBound& bound = {});

// OK if `path` names a regular file (symlinks followed). FIFOs, devices,
// sockets and directories are refused by name, without opening them (opening
// a FIFO blocks; /dev/zero never ends). Missing or unreadable: NotFound or
// PermissionDenied, naming the file.
absl::Status CheckRegularFile(const std::string& path);

}  // namespace dmg::store

#endif  // DMG_STORE_INPUT_FILE_H_
