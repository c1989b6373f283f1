// Small helpers shared by the vertex programs.
#ifndef DMG_ALGORITHMS_UTIL_H_
#define DMG_ALGORITHMS_UTIL_H_

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "store/graph.h"

namespace dmg::algorithms {

inline absl::Status CheckSource(uint64_t source, uint64_t n) {
  if (source < n) return absl::OkStatus();
  return absl::InvalidArgumentError("--source " + std::to_string(source) +
                                    " is out of range: the graph has " +
                                    std::to_string(n) + " vertices");
}

// Afforest's link (cc.cc, and each node's own forest in cc_forest.cc): puts
// u and v in one tree of `parents` (Get(v), CompareExchange(v, expected,
// desired), failed()), walking both up to roots and hooking the larger
// root under the smaller. A compare-and-swap fails if that root was hooked
// meanwhile: then it climbs and tries again, so a root stays the smallest
// vertex of its tree whatever the interleaving.
template <typename Parents>
void HookRoots(Parents& parents, store::VertexId u, store::VertexId v) {
  store::VertexId a = parents.Get(u), b = parents.Get(v);
  // (A failed READ ends the job with its error; the values then never
  // agree, so the climb stops.)
  while (a != b && !parents.failed()) {
    const store::VertexId high = std::max(a, b), low = std::min(a, b);
    const store::VertexId above = parents.Get(high);
    // Already hooked there, or hooked by us now (it was a root).
    if (above == low ||
        (above == high && parents.CompareExchange(high, high, low))) {
      return;
    }
    // `high` was hooked elsewhere meanwhile: climb and try again.
    a = parents.Get(parents.Get(high));
    b = parents.Get(low);
  }
}

}  // namespace dmg::algorithms

#endif  // DMG_ALGORITHMS_UTIL_H_
