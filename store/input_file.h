// Reads a whole input file into memory, transparently decompressing gzip and
// xz (detected by magic bytes, not by name).
#ifndef DMG_STORE_INPUT_FILE_H_
#define DMG_STORE_INPUT_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace dmg::store {

// Returns the (decompressed) bytes of `path`. Errors name the file: missing,
// unreadable, empty, or a corrupt/truncated compressed stream.
absl::StatusOr<std::string> ReadInputFile(const std::string& path);

}  // namespace dmg::store

#endif  // DMG_STORE_INPUT_FILE_H_
