// What the GPU probe's latencies say about the GPU's NUMA structure (its
// L2 partitions), after ../shared/notes/gpu-numa.md: a pointer chase per
// SM over a sample of lines gives an [SM x line] latency matrix; a 1-D
// Gaussian mixture (EM, the component count by BIC) over the hit latencies
// separates near from far; SMs that see the same lines near form one node;
// a line's home is the node that sees it near; a dense run over
// consecutive lines gives the interleave granularity. Host C++ only: the
// tests feed it synthetic matrices, `dmg gpu-probe` the measured ones.
#ifndef DMG_GPU_ANALYSIS_TOPOLOGY_H_
#define DMG_GPU_ANALYSIS_TOPOLOGY_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dmg::gpu {

// Latencies in SM clock cycles, SM-major: cycles[s * lines + l] is SM s's
// median time for one dependent load of sampled line l.
struct LatencyMatrix {
  int sms = 0;
  int lines = 0;
  std::vector<double> cycles;
  double at(int s, int l) const {
    return cycles[static_cast<size_t>(s) * lines + l];
  }
};

struct Gaussian {
  double weight = 0;  // mixing weight, the components' sum to 1
  double mean = 0;
  double sd = 0;
};

// A 1-D Gaussian mixture, components sorted by mean.
struct Mixture {
  std::vector<Gaussian> components;
  double log_likelihood = 0;
  double bic = 0;  // -2 log L + (3k - 1) ln n: lower is better
};

// EM for `k` components over `xs` (deterministic for a given seed).
Mixture FitMixture(std::span<const double> xs, int k, uint64_t seed = 1);
// Fits 1..max_k components and keeps the one with the lowest BIC.
Mixture FitMixtureByBic(std::span<const double> xs, int max_k = 4);

struct Topology {
  int nodes = 1;               // L2 partitions (NUMA nodes) found
  std::vector<int> sm_node;    // per SM, 0..nodes-1
  std::vector<int> line_home;  // per sampled line, 0..nodes-1
  double near_cycles = 0;      // mean of the near component
  double far_cycles = 0;       // mean of the far one (= near with 1 node)
  double threshold = 0;        // above it a hit is far
  // As fitted; its means, near_cycles, far_cycles and threshold are in the
  // typical SM's cycles (each SM's constant offset removed first).
  Mixture mixture;
  // Share of (SM, line) cells whose near/far call matches the topology's
  // (near exactly when the line's home is the SM's node): 1 is a clean fit.
  double agreement = 0;
};

// The topology a first-hit latency matrix shows. InvalidArgument for an
// empty or malformed matrix.
absl::StatusOr<Topology> AnalyzeLatencies(const LatencyMatrix& first_hit);

// From the homes of consecutive lines `line_bytes` apart (a dense run):
// the bytes a partition takes before addresses move to the next, the most
// common run length times line_bytes (0: one home throughout).
uint64_t InterleaveGranularity(std::span<const int> homes, uint64_t line_bytes);

}  // namespace dmg::gpu

#endif  // DMG_GPU_ANALYSIS_TOPOLOGY_H_
