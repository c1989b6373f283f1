#include "tools/snapshot_command.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "gflags/gflags.h"
#include "tools/cli.h"
#include "tools/transport_flags.h"
#include "transport/tcp_transport.h"

DEFINE_bool(jobs, false,
            "snapshot: also write the state of the jobs each memory node "
            "keeps for `dmg run --resume` (jobs whose compute nodes are "
            "gone); running jobs are left out, their state changes as it "
            "would be copied");
DEFINE_int32(snapshot_timeout_s, 3600,
             "snapshot: how long to wait for a memory node to write its "
             "snapshot");
DECLARE_string(memory_nodes);

namespace dmg::cli {

std::vector<std::string> SnapshotFlagNames() {
  return {"memory_nodes", "jobs", "snapshot_timeout_s", "transport_timeout_ms",
          "secret_file"};
}

int SnapshotCommand() {
  absl::StatusOr<std::vector<transport::HostPort>> nodes =
      transport::ParseHostPorts(FLAGS_memory_nodes);
  if (!nodes.ok()) return ReportError(nodes.status());
  if (nodes->empty()) {
    return ReportError(absl::InvalidArgumentError(
        "dmg snapshot needs --memory_nodes=HOST:PORT,..."));
  }
  if (FLAGS_snapshot_timeout_s < 1) {
    return ReportError(
        absl::InvalidArgumentError("--snapshot_timeout_s must be positive"));
  }
  absl::StatusOr<transport::TcpOptions> options =
      ClientOptions(transport::Role::kAdmin, "dmg-snapshot");
  if (!options.ok()) return ReportError(options.status());
  // A snapshot's reply comes once its file is on disk (minutes for a big
  // store): only that reply waits --snapshot_timeout_s. Connecting and the
  // hello keep --transport_timeout_ms, so a frozen node is reported then
  // (it held `dmg snapshot` for the snapshot timeout, an hour by default).
  const int reply_ms =
      std::max(options->timeout_ms, FLAGS_snapshot_timeout_s * 1000);
  absl::Status first_error;
  // One node after another, each on its own connection, so one that is
  // down does not keep the others from their snapshots.
  for (uint32_t i = 0; i < nodes->size(); ++i) {
    const transport::HostPort& node = (*nodes)[i];
    absl::StatusOr<std::unique_ptr<transport::TcpControl>> c =
        transport::TcpControl::Connect({node}, *options);
    absl::StatusOr<transport::wire::SnapshotSummary> taken =
        c.ok() ? (*c)->Snapshot(0, FLAGS_jobs, reply_ms)
               : absl::StatusOr<transport::wire::SnapshotSummary>(c.status());
    if (!taken.ok()) {
      absl::PrintF("memory node %s (position %d): no snapshot: %s\n",
                   node.ToString(), i, taken.status().message());
      if (first_error.ok()) first_error = taken.status();
      continue;
    }
    absl::PrintF(
        "memory node %s (position %d): snapshot %d written: store %.1f MB; "
        "%d job(s), %d region(s), %.1f MB of job state%s\n",
        node.ToString(), i, taken->seq, taken->store_bytes / 1e6, taken->jobs,
        taken->regions, taken->job_bytes / 1e6,
        taken->running > 0
            ? absl::StrFormat("; %d running job(s) left out", taken->running)
            : "");
  }
  std::fflush(stdout);
  if (!first_error.ok()) {
    // Refusals (no --snapshot_dir, not the admin) are the caller's to fix.
    return ReportError(first_error);
  }
  return kExitOk;
}

}  // namespace dmg::cli
