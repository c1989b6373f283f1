#include "store/generator.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "glog/logging.h"

namespace dmg::store {
namespace {

// Edges are generated in chunks of this many; each chunk has its own RNG
// stream seeded from (seed, chunk index), so the output does not depend on how
// chunks are spread over threads. Changing this changes every generated graph.
constexpr uint64_t kChunkEdges = uint64_t{1} << 16;

// Largest DEGREE * 2^SCALE accepted (2^34 edges = 128 GiB of edge list).
constexpr uint64_t kMaxEdges = uint64_t{1} << 34;

// Graph500 R-MAT quadrant probabilities (D = 1 - A - B - C = 0.05).
constexpr double kA = 0.57;
constexpr double kB = 0.19;
constexpr double kC = 0.19;

// Stream salts, so the permutation's RNG never coincides with an edge chunk's.
constexpr uint64_t kEdgeStreamSalt = 0x6b726f6e65646765ull;  // "kronedge"
constexpr uint64_t kPermStreamSalt = 0x7065726d75746521ull;  // "permute!"

// splitmix64 finalizer: a bijective 64-bit mix.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ull;
    return Mix64(state_);
  }

 private:
  uint64_t state_;
};

// xoshiro256** (Blackman & Vigna), seeded through splitmix64.
class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    SplitMix64 sm(seed);
    for (uint64_t& w : s_) w = sm.Next();
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // Uniform double in [0, 1) with 53 random bits.
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform-enough integer in [0, bound) (multiply-shift; bias < 2^-32 for
  // bound < 2^32, and deterministic).
  uint64_t Below(uint64_t bound) {
    return static_cast<uint64_t>(
        (static_cast<unsigned __int128>(Next()) * bound) >> 64);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// The seed of edge chunk `chunk` of a graph generated with `seed`.
inline uint64_t ChunkSeed(uint64_t seed, uint64_t chunk) {
  return Mix64(Mix64(seed ^ kEdgeStreamSalt) + chunk * 0x9e3779b97f4a7c15ull);
}

// One R-MAT edge: at each of the `scale` levels pick a quadrant of the
// adjacency matrix with probabilities A, B, C, D.
inline std::pair<VertexId, VertexId> KronEdge(Xoshiro256& rng, int scale) {
  uint32_t u = 0, v = 0;
  for (int level = 0; level < scale; ++level) {
    // Quadrants: [0, A) top-left (0,0), [A, A+B) top-right (0,1),
    // [A+B, A+B+C) bottom-left (1,0), [A+B+C, 1) bottom-right (1,1).
    // Branch-free: the quadrant is unpredictable by design.
    const double r = rng.NextDouble();
    const uint32_t row = r >= kA + kB;
    const uint32_t col = static_cast<uint32_t>((r >= kA) & (r < kA + kB)) |
                         static_cast<uint32_t>(r >= kA + kB + kC);
    u = (u << 1) | row;
    v = (v << 1) | col;
  }
  return {u, v};
}

// A pseudo-random permutation of [0, n): Fisher-Yates with a seeded RNG.
std::vector<VertexId> RandomPermutation(uint64_t n, uint64_t seed) {
  std::vector<VertexId> perm(n);
  for (uint64_t i = 0; i < n; ++i) perm[i] = static_cast<VertexId>(i);
  Xoshiro256 rng(Mix64(seed ^ kPermStreamSalt));
  for (uint64_t i = n; i > 1; --i) {
    const uint64_t j = rng.Below(i);  // in [0, i)
    std::swap(perm[i - 1], perm[j]);
  }
  return perm;
}

absl::Status SpecError(std::string_view spec, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("graph spec '", std::string(spec), "': ", what));
}

// Parses a whole decimal integer (no sign, no spaces) or fails.
bool ParseInt(std::string_view text, int64_t* value) {
  if (text.empty() || text.size() > 18) return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *value = v;
  return true;
}

}  // namespace

bool IsGeneratorSpec(std::string_view spec) {
  return spec.starts_with("kron:") || spec.starts_with("urand:");
}

absl::StatusOr<GeneratorParams> ParseGeneratorSpec(std::string_view spec,
                                                   uint64_t seed) {
  GeneratorParams params;
  params.seed = seed;
  // absl here uses its own string_view, so split by hand.
  std::vector<std::string_view> parts;
  for (size_t begin = 0;;) {
    const size_t colon = spec.find(':', begin);
    parts.push_back(spec.substr(begin, colon - begin));
    if (colon == std::string_view::npos) break;
    begin = colon + 1;
  }
  if (parts[0] == "kron") {
    params.kind = GeneratorParams::Kind::kKron;
  } else if (parts[0] == "urand") {
    params.kind = GeneratorParams::Kind::kUrand;
  } else {
    return SpecError(spec,
                     "not a generator (expected kron:SCALE[:DEGREE] or "
                     "urand:SCALE[:DEGREE])");
  }
  if (parts.size() < 2 || parts.size() > 3) {
    return SpecError(spec, absl::StrCat("expected ", std::string(parts[0]),
                                        ":SCALE[:DEGREE]"));
  }
  int64_t scale = 0;
  if (!ParseInt(parts[1], &scale) || scale < 1 || scale > 31) {
    return SpecError(spec, "SCALE must be an integer in 1..31");
  }
  params.scale = static_cast<int>(scale);
  if (parts.size() == 3) {
    int64_t degree = 0;
    if (!ParseInt(parts[2], &degree) || degree < 1) {
      return SpecError(spec, "DEGREE must be an integer >= 1");
    }
    if (static_cast<uint64_t>(degree) > (kMaxEdges >> scale)) {
      return SpecError(
          spec, absl::StrCat("DEGREE * 2^SCALE must be at most 2^34 edges (",
                             kMaxEdges >> scale,
                             " is the largest DEGREE at SCALE ", scale, ")"));
    }
    params.degree = static_cast<int>(degree);
  } else if (static_cast<uint64_t>(params.degree) > (kMaxEdges >> scale)) {
    return SpecError(
        spec,
        absl::StrCat("DEGREE * 2^SCALE must be at most 2^34 edges "
                     "(default DEGREE ",
                     params.degree, " is too large at SCALE ", scale, ")"));
  }
  return params;
}

EdgeList Generate(const GeneratorParams& params, int threads) {
  if (threads <= 0) threads = DefaultThreads();
  CHECK_GE(params.scale, 1);
  CHECK_LE(params.scale, 31);
  CHECK_GE(params.degree, 1);
  const int scale = params.scale;
  const uint64_t n = uint64_t{1} << scale;
  const uint64_t m = static_cast<uint64_t>(params.degree) * n;
  CHECK_LE(m, kMaxEdges);
  const bool kron = params.kind == GeneratorParams::Kind::kKron;

  EdgeList edges;
  edges.num_vertices = n;
  edges.undirected = true;
  edges.src.resize(m);
  edges.dst.resize(m);
  VertexId* const src = edges.src.data();
  VertexId* const dst = edges.dst.data();

  const uint64_t num_chunks = (m + kChunkEdges - 1) / kChunkEdges;
  const uint64_t seed = params.seed;
  ParallelRanges(
      num_chunks, threads, [&](int /*thread*/, size_t begin, size_t end) {
        for (size_t chunk = begin; chunk < end; ++chunk) {
          Xoshiro256 rng(ChunkSeed(seed, chunk));
          const uint64_t e0 = chunk * kChunkEdges;
          const uint64_t e1 = std::min(m, e0 + kChunkEdges);
          if (kron) {
            for (uint64_t e = e0; e < e1; ++e) {
              auto [u, v] = KronEdge(rng, scale);
              src[e] = u;
              dst[e] = v;
            }
          } else {
            // n = 2^scale with scale <= 31: the top `scale` bits of each
            // 32-bit half of one draw give the two endpoints.
            const int shift = 64 - scale;
            for (uint64_t e = e0; e < e1; ++e) {
              const uint64_t r = rng.Next();
              src[e] = static_cast<VertexId>(r >> shift);
              dst[e] = static_cast<VertexId>(static_cast<uint32_t>(r) >>
                                             (32 - scale));
            }
          }
        }
      });
  if (kron) {
    // R-MAT concentrates the high-degree vertices at small ids; permute them.
    const std::vector<VertexId> perm = RandomPermutation(n, seed);
    const VertexId* const p = perm.data();
    ParallelRanges(m, threads, [&](int, size_t begin, size_t end) {
      for (size_t e = begin; e < end; ++e) {
        src[e] = p[src[e]];
        dst[e] = p[dst[e]];
      }
    });
  }
  VLOG(1) << (kron ? "kron" : "urand") << ":" << scale << ":" << params.degree
          << " seed " << seed << ": " << n << " vertices, " << m << " edges";
  return edges;
}

}  // namespace dmg::store
