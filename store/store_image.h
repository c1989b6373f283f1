// A store image in memory: the exact bytes a memory node serves (and an image
// file holds), plus typed, validated accessors. Building one from a graph is
// store/layout.h; reading and writing files is store/image_file.h.
#ifndef DMG_STORE_STORE_IMAGE_H_
#define DMG_STORE_STORE_IMAGE_H_

#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/aligned_buffer.h"
#include "store/block_format.h"

namespace dmg::store {

class StoreImage {
 public:
  enum class Validation {
    // Superblock, every region's checksum, directories, every block (its
    // header, offsets, targets < n, adjacency sorted), the weight range,
    // and that the in-blocks hold the transpose of the out-blocks (and
    // equal them when the superblock says symmetric): what a file or a
    // peer hands over is checked once, here, before any compute node
    // reads it.
    kFull,
    // Superblock and region checksums only; for images this process just
    // built from a graph.
    kTrusted,
  };

  // Takes ownership of `buffer` and checks it. Errors (DataLossError or
  // FailedPreconditionError) start with `source` (a file name, or "image").
  static absl::StatusOr<StoreImage> FromBuffer(
      AlignedBuffer buffer, std::string_view source,
      Validation validation = Validation::kFull);

  StoreImage(StoreImage&&) = default;
  StoreImage& operator=(StoreImage&&) = default;

  const Superblock& superblock() const {
    return *reinterpret_cast<const Superblock*>(buffer_.data());
  }
  std::span<const std::byte> bytes() const { return buffer_.span(); }
  // Records where the graph came from in the superblock (its fingerprint;
  // the CRC is recomputed): `source` is SourceName()'s, `source_bytes` the
  // input file's size (0 for a generator).
  void SetSource(std::string_view source, uint64_t source_bytes);
  // Gives up the bytes (to a memory node that registers them).
  AlignedBuffer ReleaseBuffer() && { return std::move(buffer_); }
  uint64_t num_vertices() const { return superblock().num_vertices; }
  uint64_t num_arcs() const { return superblock().num_arcs; }
  bool weighted() const { return superblock().flags & kSuperblockFlagWeighted; }
  uint32_t block_size() const { return superblock().block_size; }
  bool compressed() const {
    return superblock().flags & kSuperblockFlagCompressed;
  }
  std::span<const RegionEntry> regions() const {
    return {superblock().regions, superblock().num_regions};
  }

  // The region of `kind` on `node`, or nullptr.
  const RegionEntry* FindRegion(RegionKind kind, uint32_t node) const;
  std::span<const std::byte> RegionBytes(const RegionEntry& region) const {
    return bytes().subspan(region.offset, region.length);
  }
  std::span<const DirectoryEntry> directory(Direction d) const;
  // The block a directory entry of direction d points at (validated when the
  // image was). A compressed block is decoded into a buffer of the calling
  // thread's: its view stays valid until this thread's next block() call.
  BlockView block(Direction d, const DirectoryEntry& entry) const;

 private:
  explicit StoreImage(AlignedBuffer buffer) : buffer_(std::move(buffer)) {}
  absl::Status ValidateSuperblock(std::string_view source) const;
  absl::Status ValidateRegions(std::string_view source) const;
  // Sums over one direction's arcs u -> v (for in-blocks, the arc from
  // the target to the block's vertex) of a 64-bit hash of each: equal sums
  // mean equal arc multisets, but for a 2^-64 chance.
  struct ArcDigest {
    uint64_t arcs = 0;      // hash of (u, v, weight)
    uint64_t pairs = 0;     // hash of (u, v): symmetric images only
    uint64_t reversed = 0;  // hash of (v, u): symmetric images only
    int32_t min_weight = 0, max_weight = 0;  // over the direction's arcs
  };
  absl::Status ValidateDirection(std::string_view source, Direction d,
                                 ArcDigest& digest) const;
  absl::Status ValidateTranspose(std::string_view source, const ArcDigest& out,
                                 const ArcDigest& in) const;

  AlignedBuffer buffer_;
};

// The superblock's source (empty: an image written before fingerprints).
std::string_view SourceOf(const Superblock& sb);

}  // namespace dmg::store

#endif  // DMG_STORE_STORE_IMAGE_H_
