#include "store/layout.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/parallel.h"
#include "glog/logging.h"
#include "store/arc_hash.h"
#include "store/block_codec.h"

namespace dmg::store {
namespace {

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Where one direction's blocks go.
struct DirectionLayout {
  std::vector<BlockPlan> plan;
  std::vector<DirectoryEntry> entries;
  std::vector<uint64_t> region_bytes;  // per memory node
};

DirectionLayout PlaceBlocks(const Csr& csr, const LayoutOptions& options) {
  DirectionLayout out;
  out.plan = PlanBlocks(csr, options.block_size, options.compress);
  out.region_bytes.assign(options.num_memory_nodes, 0);
  out.entries.resize(out.plan.size());
  for (size_t i = 0; i < out.plan.size(); ++i) {
    const BlockPlan& p = out.plan[i];
    uint32_t node = i % options.num_memory_nodes;
    const uint64_t length = p.length;
    out.entries[i] = DirectoryEntry{
        .first_vertex = p.first_vertex,
        .vertex_count = p.vertex_count,
        .offset = out.region_bytes[node],
        .length = static_cast<uint32_t>(length),
        .memory_node = static_cast<uint16_t>(node),
        .flags = p.split_piece ? kEntryFlagSplitPiece : uint16_t{0},
        .first_edge = p.first_edge,
    };
    out.region_bytes[node] += length;
  }
  return out;
}

void WriteBlock(const Csr& csr, const BlockPlan& p,
                const LayoutOptions& options, std::byte* dst) {
  if (options.compress) {
    EncodeBlock(csr, p.first_vertex, p.vertex_count, p.first_edge, p.edge_count,
                p.split_piece, NarrowOffsets(options.block_size), dst);
    return;
  }
  const bool weighted = csr.weighted();
  BlockHeader h{
      .magic = kBlockMagic,
      .flags = (weighted ? kBlockFlagWeighted : 0u) |
               (p.split_piece ? kBlockFlagSplitPiece : 0u),
      .first_vertex = p.first_vertex,
      .vertex_count = p.vertex_count,
      .edge_count = p.edge_count,
      .length = static_cast<uint32_t>(
          BlockBytes(p.vertex_count, p.edge_count, weighted)),
      .first_edge = p.first_edge,
  };
  std::memcpy(dst, &h, sizeof(h));
  auto* offsets = reinterpret_cast<uint32_t*>(dst + sizeof(h));
  if (p.split_piece) {
    offsets[0] = 0;
    offsets[1] = p.edge_count;
  } else {
    for (uint32_t i = 0; i <= p.vertex_count; ++i) {
      offsets[i] =
          static_cast<uint32_t>(csr.offsets[p.first_vertex + i] - p.first_edge);
    }
  }
  auto* targets = offsets + p.vertex_count + 1;
  // No arcs: csr.targets may be empty, its data() null, and a memcpy from
  // null is undefined even for 0 bytes.
  if (p.edge_count == 0) return;
  std::memcpy(targets, csr.targets.data() + p.first_edge,
              sizeof(VertexId) * p.edge_count);
  if (weighted) {
    std::memcpy(targets + p.edge_count, csr.weights.data() + p.first_edge,
                sizeof(Weight) * p.edge_count);
  }
}

}  // namespace

namespace {

std::vector<BlockPlan> PlanPlainBlocks(const Csr& csr, uint32_t block_size) {
  const bool weighted = csr.weighted();
  const uint64_t per_piece = EdgesPerSplitPiece(block_size, weighted);
  std::vector<BlockPlan> plan;
  uint64_t n = csr.num_vertices;
  uint64_t v = 0;
  auto add = [&](uint64_t first, uint64_t count, uint64_t first_edge,
                 uint64_t edges, bool split) {
    plan.push_back({static_cast<VertexId>(first), static_cast<uint32_t>(count),
                    first_edge, static_cast<uint32_t>(edges), split,
                    static_cast<uint32_t>(BlockBytes(count, edges, weighted))});
  };
  while (v < n) {
    uint64_t degree = csr.offsets[v + 1] - csr.offsets[v];
    if (BlockBytes(1, degree, weighted) > block_size) {
      // A vertex too big for any block: a run of split pieces.
      for (uint64_t e = 0; e < degree; e += per_piece) {
        add(v, 1, csr.offsets[v] + e, std::min(per_piece, degree - e), true);
      }
      ++v;
      continue;
    }
    // Greedy: extend while the block still fits.
    uint64_t first = v, edges = degree;
    ++v;
    while (v < n) {
      uint64_t d = csr.offsets[v + 1] - csr.offsets[v];
      if (BlockBytes(v - first + 1, edges + d, weighted) > block_size) break;
      edges += d;
      ++v;
    }
    add(first, v - first, csr.offsets[first], edges, false);
  }
  return plan;
}

// As above with compressed sizes: each vertex's segment measured first.
std::vector<BlockPlan> PlanCompressedBlocks(const Csr& csr,
                                            uint32_t block_size) {
  const uint64_t n = csr.num_vertices;
  const bool narrow = NarrowOffsets(block_size);
  std::vector<uint64_t> segment(n);
  ParallelRanges(n, DefaultThreads(), [&](int, size_t b, size_t e) {
    for (size_t v = b; v < e; ++v) {
      segment[v] = SegmentBytes(csr, static_cast<VertexId>(v), csr.offsets[v],
                                csr.offsets[v + 1]);
    }
  });
  std::vector<BlockPlan> plan;
  auto add = [&](uint64_t first, uint64_t count, uint64_t first_edge,
                 uint64_t edges, bool split, uint64_t data) {
    plan.push_back(
        {static_cast<VertexId>(first), static_cast<uint32_t>(count), first_edge,
         static_cast<uint32_t>(edges), split,
         static_cast<uint32_t>(CompressedBlockBytes(count, data, narrow))});
  };
  uint64_t v = 0;
  while (v < n) {
    if (CompressedBlockBytes(1, segment[v], narrow) > block_size) {
      // Split pieces, each as many edges as fit (a piece's first edge is
      // relative to v again). Any block size holds one edge.
      const VertexId u = static_cast<VertexId>(v);
      for (uint64_t k = csr.offsets[v], end = csr.offsets[v + 1]; k < end;) {
        const uint64_t from = k;
        SegmentSizer piece(csr, u);
        while (k < end && CompressedBlockBytes(1, piece.BytesWith(k), narrow) <=
                              block_size) {
          piece.Add(k++);
        }
        add(v, 1, from, k - from, true, piece.bytes());
      }
      ++v;
      continue;
    }
    uint64_t first = v, data = segment[v];
    ++v;
    while (v < n && CompressedBlockBytes(v - first + 1, data + segment[v],
                                         narrow) <= block_size) {
      data += segment[v];
      ++v;
    }
    add(first, v - first, csr.offsets[first],
        csr.offsets[v] - csr.offsets[first], false, data);
  }
  return plan;
}

}  // namespace

std::vector<BlockPlan> PlanBlocks(const Csr& csr, uint32_t block_size,
                                  bool compress) {
  return compress ? PlanCompressedBlocks(csr, block_size)
                  : PlanPlainBlocks(csr, block_size);
}

absl::StatusOr<StoreImage> BuildStoreImage(const Graph& graph,
                                           const LayoutOptions& options) {
  if (options.block_size < kMinBlockSize ||
      options.block_size > kMaxBlockSize || options.block_size % 8 != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("block size %d must be a multiple of 8 in [%d, %d]",
                        options.block_size, kMinBlockSize, kMaxBlockSize));
  }
  if (options.num_memory_nodes == 0 || options.num_memory_nodes > 1024) {
    return absl::InvalidArgumentError("number of memory nodes must be 1..1024");
  }
  if (graph.num_vertices() == 0) {
    return absl::InvalidArgumentError("graph has no vertices");
  }
  const int threads = options.threads > 0 ? options.threads : DefaultThreads();
  const Csr* csr[2] = {&graph.out, &graph.in};
  DirectionLayout dl[2] = {PlaceBlocks(graph.out, options),
                           PlaceBlocks(graph.in, options)};

  // Region table: directories on node 0, then each node's blocks regions.
  std::vector<RegionEntry> regions;
  uint64_t cursor = kSuperblockSize;
  auto add_region = [&](RegionKind kind, uint32_t node, uint64_t length) {
    regions.push_back(
        {static_cast<uint32_t>(kind), node, cursor, length, 0, 0});
    cursor = AlignUp(cursor + length, kRegionAlignment);
  };
  for (int d = 0; d < 2; ++d) {
    add_region(DirectoryKind(static_cast<Direction>(d)), 0,
               dl[d].entries.size() * sizeof(DirectoryEntry));
  }
  for (uint32_t node = 0; node < options.num_memory_nodes; ++node) {
    for (int d = 0; d < 2; ++d) {
      add_region(BlocksKind(static_cast<Direction>(d)), node,
                 dl[d].region_bytes[node]);
    }
  }
  if (regions.size() > kMaxRegions) {
    return absl::InvalidArgumentError("too many memory nodes for one image");
  }
  const uint64_t image_size = regions.back().offset + regions.back().length;

  AlignedBuffer buffer(image_size);
  std::byte* base = buffer.data();
  auto region_of = [&](RegionKind kind, uint32_t node) -> RegionEntry& {
    for (RegionEntry& r : regions) {
      if (r.kind == static_cast<uint32_t>(kind) && r.memory_node == node) {
        return r;
      }
    }
    LOG(FATAL) << "region missing";
    std::abort();
  };
  for (int d = 0; d < 2; ++d) {
    Direction dir = static_cast<Direction>(d);
    std::memcpy(base + region_of(DirectoryKind(dir), 0).offset,
                dl[d].entries.data(),
                dl[d].entries.size() * sizeof(DirectoryEntry));
    std::vector<uint64_t> region_offset(options.num_memory_nodes);
    for (uint32_t node = 0; node < options.num_memory_nodes; ++node) {
      region_offset[node] = region_of(BlocksKind(dir), node).offset;
    }
    ParallelRanges(dl[d].plan.size(), threads, [&](int, size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        const DirectoryEntry& entry = dl[d].entries[i];
        WriteBlock(*csr[d], dl[d].plan[i], options,
                   base + region_offset[entry.memory_node] + entry.offset);
      }
    });
  }
  for (RegionEntry& r : regions) {
    r.crc32 = Crc32({base + r.offset, r.length});
  }

  Superblock sb{};
  std::memcpy(sb.magic, kImageMagic, sizeof(kImageMagic));
  sb.format_version = options.compress ? 2 : kPlainFormatVersion;
  sb.superblock_size = kSuperblockSize;
  sb.num_vertices = graph.num_vertices();
  sb.num_arcs = graph.num_arcs();
  sb.image_size = image_size;
  sb.block_size = options.block_size;
  sb.flags = graph.weighted() ? kSuperblockFlagWeighted : 0;
  if (options.compress) sb.flags |= kSuperblockFlagCompressed;
  if (graph.out.offsets == graph.in.offsets &&
      graph.out.targets == graph.in.targets) {
    sb.flags |= kSuperblockFlagSymmetric;
  }
  sb.num_memory_nodes = options.num_memory_nodes;
  sb.num_regions = static_cast<uint32_t>(regions.size());
  sb.num_blocks[0] = dl[0].entries.size();
  sb.num_blocks[1] = dl[1].entries.size();
  sb.input_arcs = graph.report.input_arcs;
  sb.self_loops_removed = graph.report.self_loops_removed;
  sb.parallel_arcs_removed = graph.report.parallel_arcs_removed;
  sb.arcs_added_by_symmetrize = graph.report.arcs_added_by_symmetrize;
  if (!graph.out.weights.empty()) {
    auto [lo, hi] =
        std::minmax_element(graph.out.weights.begin(), graph.out.weights.end());
    sb.min_weight = *lo;
    sb.max_weight = *hi;
  }
  std::copy(regions.begin(), regions.end(), sb.regions);
  sb.arc_digest = ArcDigestOf(graph.out, options.threads);
  sb.crc32 =
      Crc32({reinterpret_cast<const std::byte*>(&sb), kSuperblockSize - 4});
  std::memcpy(base, &sb, sizeof(sb));
  return StoreImage::FromBuffer(std::move(buffer), "image",
                                StoreImage::Validation::kTrusted);
}

}  // namespace dmg::store
