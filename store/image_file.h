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

// True if `path` is a readable regular file starting with the store image
// magic.
bool IsStoreImageFile(const std::string& path);

// True if `path` is meant as a store image, intact or not: a regular file
// named *.img, or whose first 8 bytes are mostly the magic (a damaged image
// is read as one, and reported as damaged, not parsed as a text graph).
bool LooksLikeStoreImage(const std::string& path);

absl::Status WriteImageFile(const StoreImage& image, const std::string& path);

// Reads and fully validates an image (every checksum, directory and block).
absl::StatusOr<StoreImage> ReadImageFile(const std::string& path);

// Reads only an image file's superblock (magic and CRC checked): its
// fingerprint, without reading the image.
absl::StatusOr<Superblock> ReadSuperblock(const std::string& path);

// OK if `path` may be written by WriteFileAtomically: it does not exist, or
// is a regular file. Commands check their outputs with it before working.
absl::Status CheckOutputPath(const std::string& path);

// Writes `bytes` to `path` atomically (shared by other file outputs), through
// `path.tmp.PID`. A `path` that exists and is not a regular file (a device,
// a FIFO, a symlink, a directory) is refused, not replaced. The temporary
// file is removed on failure and on SIGTERM/SIGINT (a handler unlinks the
// ones being written, then passes the signal on); stale `path.tmp.PID`
// files of processes that no longer run are removed first.
absl::Status WriteFileAtomically(const std::string& path,
                                 std::span<const std::byte> bytes);

}  // namespace dmg::store

#endif  // DMG_STORE_IMAGE_FILE_H_
