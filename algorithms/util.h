// Small helpers shared by the vertex programs.
#ifndef DMG_ALGORITHMS_UTIL_H_
#define DMG_ALGORITHMS_UTIL_H_

#include <string>

#include "absl/status/status.h"

namespace dmg::algorithms {

inline absl::Status CheckSource(uint64_t source, uint64_t n) {
  if (source < n) return absl::OkStatus();
  return absl::InvalidArgumentError("--source " + std::to_string(source) +
                                    " is out of range: the graph has " +
                                    std::to_string(n) + " vertices");
}

}  // namespace dmg::algorithms

#endif  // DMG_ALGORITHMS_UTIL_H_
