// Reads a whole input file into memory, transparently decompressing gzip and
// xz (detected by magic bytes, not by name).
#ifndef DMG_STORE_INPUT_FILE_H_
#define DMG_STORE_INPUT_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dmg::store {

// Returns the (decompressed) bytes of `path`. Errors name the file: missing,
// unreadable, empty, or a corrupt/truncated compressed stream.
absl::StatusOr<std::string> ReadInputFile(const std::string& path);

// OK if `path` names a regular file (symlinks followed). FIFOs, devices,
// sockets and directories are refused by name, without opening them (opening
// a FIFO blocks; /dev/zero never ends). Missing or unreadable: NotFound or
// PermissionDenied, naming the file.
absl::Status CheckRegularFile(const std::string& path);

// The memory this process may still take without swapping: MemAvailable
// from /proc/meminfo, in bytes; 0 when unknown.
uint64_t AvailableMemoryBytes();

}  // namespace dmg::store

#endif  // DMG_STORE_INPUT_FILE_H_
