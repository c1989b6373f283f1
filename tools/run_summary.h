// What `dmg run --summary_json=FILE` writes: one JSON object per job with
// the graph, the algorithm, where it ran and every trial's figures, for
// scripts (deploy/experiments) to read instead of parsing the summary line.
// The format is named "dmg-summary-1"; fields are added, never renamed.
#ifndef DMG_TOOLS_RUN_SUMMARY_H_
#define DMG_TOOLS_RUN_SUMMARY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compute_node/page_cache.h"
#include "store/graph.h"
#include "transport/transport.h"

namespace dmg::cli {

struct TrialSummary {
  int trial = 1;                         // 1-based
  std::vector<store::VertexId> sources;  // empty: the algorithm takes none
  double seconds = 0;                    // the compute node's whole run
  int supersteps = 0;
  transport::OpStats remote;  // the job's (all compute nodes)
  compute::CacheCounters cache;
  std::vector<std::pair<std::string, int64_t>> counts;  // "reached", ...
  std::optional<bool> converged;
};

struct RunSummary {
  std::string version;
  // --graph, or on memory nodes without it the graph they hold (its
  // fingerprint's source name).
  std::string graph;
  // The store's fingerprint (docs/STORE_FORMAT.md): where the graph came
  // from and the digest of its arcs ("" when the store predates them).
  std::string graph_source, graph_digest;
  std::string algorithm;
  std::string precision;  // pagerank's float | double ("" for the others)
  std::string transport;  // local | tcp | rdma
  int memory_nodes = 0;
  std::vector<std::string> memory_node_addresses;  // none for local
  int compute_nodes = 1;
  int threads = 0;
  uint64_t vertices = 0, arcs = 0;
  double load_seconds = 0;
  std::string cache_policy;
  uint64_t cache_bound_bytes = 0;  // 0: unbounded
  uint64_t cache_peak_bytes = 0;
  std::vector<TrialSummary> trials;
  std::string verify = "not run";  // ok | mismatch | not run
  // --gpu (auto | on | off), whether a GPU ran a share, and why not.
  std::string gpu_mode = "off";
  bool gpu_used = false;
  std::string gpu_note;
};

// Average, median, smallest and largest of the values (all 0 when empty).
struct Spread {
  double average = 0, median = 0, min = 0, max = 0;
};
Spread SpreadOf(std::vector<double> values);

std::string ToJson(const RunSummary& summary);

}  // namespace dmg::cli

#endif  // DMG_TOOLS_RUN_SUMMARY_H_
