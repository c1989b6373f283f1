#include "store/block_format.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/parallel.h"

namespace dmg::store {

namespace {

uint32_t Crc32Serial(const std::byte* data, size_t n) {
  uLong crc = crc32_z(0L, Z_NULL, 0);
  return static_cast<uint32_t>(
      crc32_z(crc, reinterpret_cast<const Bytef*>(data), n));
}

}  // namespace

uint32_t Crc32(std::span<const std::byte> bytes) {
  constexpr size_t kParallelThreshold = 8 << 20;
  int threads = DefaultThreads();
  if (bytes.size() < kParallelThreshold || threads == 1) {
    return Crc32Serial(bytes.data(), bytes.size());
  }
  std::vector<uint32_t> crc(threads);
  std::vector<size_t> len(threads);
  ParallelRanges(bytes.size(), threads, [&](int t, size_t b, size_t e) {
    crc[t] = Crc32Serial(bytes.data() + b, e - b);
    len[t] = e - b;
  });
  uLong total = crc[0];
  for (int t = 1; t < threads; ++t) {
    total = crc32_combine(total, crc[t], static_cast<z_off_t>(len[t]));
  }
  return static_cast<uint32_t>(total);
}

namespace {

// Whether any of ids[0, count) is at least `lim`, BYTES of ids a vector
// (GCC/Clang vector extensions: lane compares, no branch), two vectors a
// step. A macro, not a template: GCC ignores vector_size with a dependent
// size, and each target's function below must hold its own vectors.
#define DMG_ANY_AT_LEAST(BYTES)                             \
  typedef uint32_t Ids __attribute__((vector_size(BYTES))); \
  typedef int32_t Mask __attribute__((vector_size(BYTES))); \
  constexpr size_t kLanes = (BYTES) / sizeof(uint32_t);     \
  Ids limit;                                                \
  for (size_t k = 0; k < kLanes; ++k) limit[k] = lim;       \
  Mask a = {}, b = {};                                      \
  size_t i = 0;                                             \
  for (; i + 2 * kLanes <= count; i += 2 * kLanes) {        \
    Ids x, y;                                               \
    std::memcpy(&x, p + i, sizeof(x));                      \
    std::memcpy(&y, p + i + kLanes, sizeof(y));             \
    a |= x >= limit;                                        \
    b |= y >= limit;                                        \
  }                                                         \
  a |= b;                                                   \
  int32_t any = 0;                                          \
  for (size_t k = 0; k < kLanes; ++k) any |= a[k];          \
  for (; i < count; ++i) any |= p[i] >= lim;                \
  return any != 0

bool AnyAtLeastBase(const VertexId* p, size_t count, uint32_t lim) {
  DMG_ANY_AT_LEAST(16);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DMG_ANY_AT_LEAST_AVX2 1
// Every block read is checked (kron-20 PageRank at 5%: 8% of its time at
// 16 bytes a compare); 32 bytes where the CPU has AVX2, chosen at run time
// (the build targets plain x86-64).
[[gnu::target("avx2")]] bool AnyAtLeastAvx2(const VertexId* p, size_t count,
                                            uint32_t lim) {
  DMG_ANY_AT_LEAST(32);
}
#endif

}  // namespace

bool AnyIdAtLeast(std::span<const VertexId> ids, uint64_t n) {
  if (n > 0xFFFFFFFFull) return false;  // every 32-bit id is below n
  const uint32_t lim = static_cast<uint32_t>(n);
#ifdef DMG_ANY_AT_LEAST_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return AnyAtLeastAvx2(ids.data(), ids.size(), lim);
#endif
  return AnyAtLeastBase(ids.data(), ids.size(), lim);
}

bool AnyIdAtLeastWithoutAvx2(std::span<const VertexId> ids, uint64_t n) {
  if (n > 0xFFFFFFFFull) return false;
  return AnyAtLeastBase(ids.data(), ids.size(), static_cast<uint32_t>(n));
}

std::string_view RegionKindName(RegionKind kind) {
  switch (kind) {
    case RegionKind::kOutDirectory:
      return "out-directory";
    case RegionKind::kOutBlocks:
      return "out-blocks";
    case RegionKind::kInDirectory:
      return "in-directory";
    case RegionKind::kInBlocks:
      return "in-blocks";
  }
  return "unknown";
}

absl::StatusOr<BlockView> BlockView::Parse(std::span<const std::byte> bytes,
                                           uint64_t num_vertices) {
  if (bytes.size() < sizeof(BlockHeader)) {
    return absl::DataLossError(absl::StrFormat(
        "block of %d bytes is shorter than its header", bytes.size()));
  }
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint64_t) != 0) {
    return absl::InvalidArgumentError("block bytes are not 8-byte aligned");
  }
  BlockView view;
  view.header_ = reinterpret_cast<const BlockHeader*>(bytes.data());
  const BlockHeader& h = *view.header_;
  if (h.magic != kBlockMagic) {
    return absl::DataLossError(
        absl::StrFormat("bad block magic 0x%08x", h.magic));
  }
  if (h.flags & kBlockFlagCompressed) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "block at vertex %d is compressed: decode it first", h.first_vertex));
  }
  const bool weighted = h.flags & kBlockFlagWeighted;
  if (h.vertex_count == 0 ||
      h.length != BlockBytes(h.vertex_count, h.edge_count, weighted) ||
      h.length > bytes.size()) {
    return absl::DataLossError(absl::StrFormat(
        "block at vertex %d: length %d inconsistent with %d vertices, %d "
        "edges (%d bytes available)",
        h.first_vertex, h.length, h.vertex_count, h.edge_count, bytes.size()));
  }
  if (uint64_t{h.first_vertex} + h.vertex_count - 1 > kMaxVertexId) {
    return absl::DataLossError("block vertex range overflows");
  }
  const std::byte* p = bytes.data() + sizeof(BlockHeader);
  view.offsets_ = reinterpret_cast<const uint32_t*>(p);
  view.targets_ =
      reinterpret_cast<const VertexId*>(p + 4 * (uint64_t{h.vertex_count} + 1));
  view.weights_ =
      weighted ? reinterpret_cast<const Weight*>(view.targets_ + h.edge_count)
               : nullptr;
  if (view.offsets_[0] != 0 || view.offsets_[h.vertex_count] != h.edge_count) {
    return absl::DataLossError(
        absl::StrFormat("block at vertex %d: offsets do not span its %d edges",
                        h.first_vertex, h.edge_count));
  }
  for (uint32_t i = 0; i < h.vertex_count; ++i) {
    if (view.offsets_[i] > view.offsets_[i + 1]) {
      return absl::DataLossError(
          absl::StrFormat("block at vertex %d: offsets decrease at vertex %d",
                          h.first_vertex, h.first_vertex + i));
    }
  }
  // Every target a vertex: one vectorized pass, so that nothing
  // downstream indexes a vertex array with a forged id.
  if (AnyIdAtLeast(view.all_targets(), num_vertices)) {
    // Cold: find whose target it is.
    const std::span<const VertexId> all = view.all_targets();
    const VertexId most = *std::max_element(all.begin(), all.end());
    uint32_t i = 0;
    while (i + 1 < h.vertex_count &&
           !AnyIdAtLeast({view.targets_ + view.offsets_[i],
                          view.targets_ + view.offsets_[i + 1]},
                         num_vertices)) {
      ++i;
    }
    return absl::DataLossError(absl::StrFormat(
        "block at vertex %d: edge target %d of vertex %d is not a vertex (the "
        "graph has %d)",
        h.first_vertex, most, uint64_t{h.first_vertex} + i, num_vertices));
  }
  return view;
}

std::pair<uint64_t, uint64_t> NodeSlice(const Superblock& sb, uint32_t node) {
  uint64_t begin = node == 0 ? 0 : ~uint64_t{0}, end = 0;
  for (uint32_t i = 0; i < std::min(sb.num_regions, kMaxRegions); ++i) {
    const RegionEntry& r = sb.regions[i];
    if (r.memory_node != node) continue;
    begin = std::min(begin, r.offset);
    end = std::max(end, r.offset + r.length);
  }
  if (begin > end) return {0, 0};
  return {begin, end};
}

std::pair<size_t, size_t> FindBlocks(std::span<const DirectoryEntry> directory,
                                     VertexId v) {
  // The last entry starting at or before v holds v (or is the last piece of
  // v's run); a run's pieces all start at v.
  auto after = std::upper_bound(
      directory.begin(), directory.end(), v,
      [](VertexId x, const DirectoryEntry& e) { return x < e.first_vertex; });
  size_t last = after - directory.begin();
  if (last == 0) return {0, 0};
  const DirectoryEntry& e = directory[last - 1];
  if (!(e.flags & kEntryFlagSplitPiece)) return {last - 1, last};
  auto first = std::lower_bound(
      directory.begin(), directory.begin() + last, v,
      [](const DirectoryEntry& e, VertexId x) { return e.first_vertex < x; });
  return {static_cast<size_t>(first - directory.begin()), last};
}

}  // namespace dmg::store
