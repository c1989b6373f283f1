// Store image files: the image's bytes, exactly, in a file. Writing is atomic
// (temporary file, fsync, rename, fsync of the folder) so a crash or a bad
// input never leaves a partial image behind.
#ifndef DMG_STORE_IMAGE_FILE_H_
#define DMG_STORE_IMAGE_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/store_image.h"

namespace dmg::store {

// True if `path` is a readable file starting with the store image magic.
bool IsStoreImageFile(const std::string& path);

absl::Status WriteImageFile(const StoreImage& image, const std::string& path);

// Reads and fully validates an image (every checksum, directory and block).
absl::StatusOr<StoreImage> ReadImageFile(const std::string& path);

// Writes `bytes` to `path` atomically (shared by other file outputs).
absl::Status WriteFileAtomically(const std::string& path,
                                 std::span<const std::byte> bytes);

}  // namespace dmg::store

#endif  // DMG_STORE_IMAGE_FILE_H_
