#include "store/summary.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dmg::store {

DegreeStats ComputeDegreeStats(std::vector<uint64_t> degrees) {
  DegreeStats s;
  if (degrees.empty()) return s;
  uint64_t sum = 0;
  for (uint64_t d : degrees) {
    sum += d;
    s.zero += d == 0;
  }
  s.mean = static_cast<double>(sum) / degrees.size();
  auto at = [&](double q) {
    size_t k =
        std::min(degrees.size() - 1, static_cast<size_t>(q * degrees.size()));
    std::nth_element(degrees.begin(), degrees.begin() + k, degrees.end());
    return degrees[k];
  };
  s.median = at(0.5);
  s.p99 = at(0.99);
  auto [mn, mx] = std::minmax_element(degrees.begin(), degrees.end());
  s.min = *mn;
  s.max = *mx;
  return s;
}

DirectionSummary SummarizeDirection(const StoreImage& image, Direction d) {
  DirectionSummary s;
  std::vector<uint64_t> degrees(image.num_vertices(), 0);
  for (const DirectoryEntry& e : image.directory(d)) {
    BlockView block = image.block(d, e);
    for (uint32_t i = 0; i < e.vertex_count; ++i) {
      degrees[e.first_vertex + i] += block.targets(e.first_vertex + i).size();
    }
    ++s.blocks;
    s.split_pieces += (e.flags & kEntryFlagSplitPiece) != 0;
    s.block_bytes += e.length;
  }
  s.directory_bytes = s.blocks * sizeof(DirectoryEntry);
  s.degree = ComputeDegreeStats(std::move(degrees));
  return s;
}

std::string FormatSummary(const StoreImage& image, std::string_view name) {
  const Superblock& sb = image.superblock();
  std::string out;
  auto line = [&](std::string_view key, const std::string& value) {
    absl::StrAppendFormat(&out, "%-26s %s\n", std::string(key) + ":", value);
  };
  line("graph", std::string(name));
  line("vertices", absl::StrCat(sb.num_vertices));
  line("arcs", absl::StrCat(sb.num_arcs));
  line("weighted", image.weighted() ? "yes" : "no");
  if (image.weighted()) {
    line("weights",
         absl::StrFormat("min %d  max %d", sb.min_weight, sb.max_weight));
  }
  line("input arcs", absl::StrCat(sb.input_arcs));
  line("self-loops removed", absl::StrCat(sb.self_loops_removed));
  line("parallel arcs removed", absl::StrCat(sb.parallel_arcs_removed));
  line("reverse arcs added", absl::StrCat(sb.arcs_added_by_symmetrize));
  for (Direction d : {Direction::kOut, Direction::kIn}) {
    DirectionSummary s = SummarizeDirection(image, d);
    const char* dir = d == Direction::kOut ? "out" : "in";
    line(absl::StrCat(dir, "-degree"),
         absl::StrFormat("min %d  max %d  mean %.2f  median %d  p99 %d  "
                         "zero %d",
                         s.degree.min, s.degree.max, s.degree.mean,
                         s.degree.median, s.degree.p99, s.degree.zero));
    line(absl::StrCat(dir, "-blocks"),
         absl::StrFormat(
             "%d (split pieces %d), %d bytes, directory %d "
             "bytes, %.2f bytes per arc",
             s.blocks, s.split_pieces, s.block_bytes, s.directory_bytes,
             sb.num_arcs ? double(s.block_bytes) / sb.num_arcs : 0.0));
  }
  line("block size", absl::StrCat(sb.block_size));
  line("block encoding", image.compressed()
                             ? "compressed (delta + bit-packed ids), format 2"
                             : "plain (u32 ids), format 1");
  line("memory nodes", absl::StrCat(sb.num_memory_nodes));
  line("region superblock", absl::StrCat(kSuperblockSize, " bytes"));
  for (const RegionEntry& r : image.regions()) {
    line(absl::StrFormat("region %s node %d",
                         RegionKindName(static_cast<RegionKind>(r.kind)),
                         r.memory_node),
         absl::StrCat(r.length, " bytes"));
  }
  const uint64_t raw = sb.num_arcs * (image.weighted() ? 12 : 8);
  line("image size",
       absl::StrFormat("%d bytes (%.3fx the %d bytes of raw "
                       "%s arcs)",
                       sb.image_size, raw ? double(sb.image_size) / raw : 0.0,
                       raw, image.weighted() ? "12-byte" : "8-byte"));
  return out;
}

}  // namespace dmg::store
