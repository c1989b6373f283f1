// The registry of algorithms: the one place that `dmg run --algo=NAME`, its
// help text, --verify, --output and the tests learn about an algorithm.
// Adding an algorithm is a kernel file in algorithms/, a reference in
// reference/, and one entry in registry.cc.
#ifndef DMG_ALGORITHMS_REGISTRY_H_
#define DMG_ALGORITHMS_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/algorithms.h"
#include "compute_node/engine.h"
#include "reference/compare.h"
#include "store/graph.h"

namespace dmg::algorithms {

// The L1 distance a float PageRank may have from the double reference on
// top of its tolerance (docs/ARCHITECTURE.md, "Precision").
inline constexpr double kFloatPageRankL1 = 1e-5;

// What a run takes from the command line (each algorithm reads its own).
struct Params {
  store::VertexId source = 0;               // bfs, sssp (and bc by default)
  std::vector<store::VertexId> sources;     // bc
  int max_iters = 20;                       // pagerank
  double tolerance = 1e-4;                  // pagerank
  bool unit_weights = false;                // sssp
  Precision precision = Precision::kFloat;  // pagerank
};

// A result: one value per vertex (written as `vertex value` lines), or a
// single count (written alone on one line).
using Values =
    std::variant<std::vector<double>, std::vector<int32_t>,
                 std::vector<uint32_t>, std::vector<int64_t>, uint64_t>;

struct Outcome {
  Values values;
  std::string detail;  // the end of the summary line, e.g. "5 reached"
  // The same figures for scripts (--summary_json): "reached", "components",
  // "iterations", "triangles", ... in the order they were named.
  std::vector<std::pair<std::string, int64_t>> counts = {};
  // PageRank: whether the L1 change fell below --tolerance before
  // --max_iters ran out (absent for algorithms that always finish).
  std::optional<bool> converged = std::nullopt;
};

// Which sources an algorithm uses.
enum class Sources {
  kNone,
  kOne,   // --source=V|random
  kMany,  // --source=V|random, or --sources=K seeded picks
};

struct Algorithm {
  std::string name;
  std::string help;                // one line for `dmg run --help`
  std::vector<std::string> flags;  // the run flags it reads, for the help
  Sources sources = Sources::kNone;
  // Runs on the engine.
  std::function<absl::StatusOr<Outcome>(compute::Engine&, const Params&)> run;
  // The independent in-memory reference on the same graph.
  std::function<absl::StatusOr<Values>(const store::Graph&, const Params&)>
      reference;
  // Compares a run's values with the reference's (the parameters say how
  // close they must be: PageRank's tolerance depends on its precision).
  std::function<reference::Mismatch(const Values& expected,
                                    const Values& actual, const Params&)>
      compare;
};

// Every algorithm, in the order help lists them.
const std::vector<Algorithm>& Registry();
// The entry named `name`, or nullptr.
const Algorithm* FindAlgorithm(std::string_view name);
// "pagerank | bfs | ..." for help texts and errors.
std::string AlgorithmNames(std::string_view separator = " | ");

// `count` sources picked as GAPBS's SourcePicker does: uniformly random
// vertices with out-arcs (repeats possible), from a seeded generator, so a
// run and its reference use the same ones.
absl::StatusOr<std::vector<store::VertexId>> PickSources(
    compute::Engine& engine, int count, uint64_t seed);

}  // namespace dmg::algorithms

#endif  // DMG_ALGORITHMS_REGISTRY_H_
