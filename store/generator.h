// Synthetic graph generators in the style of Graph500/GAPBS:
//   kron:SCALE[:DEGREE]  R-MAT with A=0.57 B=0.19 C=0.19, vertex ids permuted
//   urand:SCALE[:DEGREE] uniform random (Erdos-Renyi style) endpoints
// 2^SCALE vertices and DEGREE * 2^SCALE undirected edges (default DEGREE 16).
// Output depends only on (kind, scale, degree, seed): never on thread count.
#ifndef DMG_STORE_GENERATOR_H_
#define DMG_STORE_GENERATOR_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "store/graph.h"

namespace dmg::store {

struct GeneratorParams {
  enum class Kind { kKron, kUrand };
  Kind kind = Kind::kKron;
  int scale = 0;
  int degree = 16;
  uint64_t seed = 1;
};

// True if `spec` names a generator ("kron:..." or "urand:...").
bool IsGeneratorSpec(std::string_view spec);

// Parses "kron:SCALE[:DEGREE]" / "urand:SCALE[:DEGREE]".
absl::StatusOr<GeneratorParams> ParseGeneratorSpec(std::string_view spec,
                                                   uint64_t seed);

// Generates the edge list (undirected = true; each edge once, cleaning adds
// the reverse arcs). threads <= 0 means all cores.
EdgeList Generate(const GeneratorParams& params, int threads = 0);

}  // namespace dmg::store

#endif  // DMG_STORE_GENERATOR_H_
