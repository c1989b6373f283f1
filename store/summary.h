// What `dmg info` prints: counts, degree statistics, blocks and bytes per
// region, all computed from a store image (so images and files agree).
#ifndef DMG_STORE_SUMMARY_H_
#define DMG_STORE_SUMMARY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "store/store_image.h"

namespace dmg::store {

struct DegreeStats {
  uint64_t min = 0;
  uint64_t max = 0;
  double mean = 0;
  uint64_t median = 0;
  uint64_t p99 = 0;
  uint64_t zero = 0;  // vertices with degree 0
};

struct DirectionSummary {
  DegreeStats degree;
  uint64_t blocks = 0;
  uint64_t split_pieces = 0;
  uint64_t directory_bytes = 0;
  uint64_t block_bytes = 0;
};

DegreeStats ComputeDegreeStats(std::vector<uint64_t> degrees);
DirectionSummary SummarizeDirection(const StoreImage& image, Direction d);

// Multi-line "key: value" text. Integers are printed plainly so scripts can
// parse them.
std::string FormatSummary(const StoreImage& image, std::string_view name);

}  // namespace dmg::store

#endif  // DMG_STORE_SUMMARY_H_
