// What a `dmg run` reports: a line per trial (several), --verify against
// the in-memory reference, then the summary line, the cache line, --top,
// --stats_json, --output and --summary_json. The summary line, the JSON
// and the --output formats are interfaces scripts parse: fields are added,
// never renamed or dropped.
#ifndef DMG_TOOLS_RUN_REPORT_H_
#define DMG_TOOLS_RUN_REPORT_H_

#include <optional>

#include "absl/status/statusor.h"
#include "store/graph.h"
#include "tools/run_config.h"
#include "tools/run_summary.h"
#include "tools/run_trials.h"

namespace dmg::cli {

class RunReport {
 public:
  RunReport(const RunConfig& config, TrialRunner& runner);

  // After trial `trial` (0-based) on this process's node 0: records it,
  // and verifies it with --verify. False: a mismatch, reported (and the
  // summary written with verify "mismatch").
  absl::StatusOr<bool> AddTrial(int trial);
  // After the last trial: everything that ends a run.
  absl::Status Finish();

 private:
  absl::StatusOr<bool> VerifyTrial(int trial);
  void PrintSummaryLine();
  absl::Status WriteSummary();

  const RunConfig& config_;
  TrialRunner& runner_;
  RunSummary summary_;
  std::optional<store::Graph> reference_;  // --verify: read once
  uint64_t rss_peak_ = 0;
};

// Where the human-readable report goes: stdout, unless stdout carries
// --output=- or a JSON file, then stderr, so a pipe gets only the data.
FILE* Report();

}  // namespace dmg::cli

#endif  // DMG_TOOLS_RUN_REPORT_H_
