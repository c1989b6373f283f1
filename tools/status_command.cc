#include "tools/status_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/strings/str_format.h"
#include "gflags/gflags.h"
#include "tools/cli.h"
#include "tools/transport_flags.h"
#include "transport/tcp_transport.h"

DEFINE_int32(wait_ms, 0,
             "status: keep asking until every memory node answers or this "
             "many ms passed (0: ask once)");
DEFINE_bool(require_store, false,
            "status: a memory node counts as ready only once a store is "
            "loaded into it");
DECLARE_string(memory_nodes);
DECLARE_int32(transport_timeout_ms);

namespace dmg::cli {

// One control connection per node, so a node that is down does not hide
// the others' answers.
MemoryNodeStatus AskMemoryNode(const transport::HostPort& node,
                               uint32_t position) {
  MemoryNodeStatus st;
  // The admin sees every job's regions; a job key sees the store.
  absl::StatusOr<std::optional<transport::Secret>> secret = SecretFromFlags();
  if (!secret.ok()) {
    st.line =
        absl::StrFormat("memory node %s (position %d): %s", node.ToString(),
                        position, secret.status().message());
    return st;
  }
  const bool admin = !*secret || (*secret)->admin();
  // A job-key status is a job of its own: a name no one else uses, since a
  // job's name is bound to one job token on the node while it is there.
  char host[256] = "host";
  gethostname(host, sizeof(host) - 1);
  absl::StatusOr<transport::TcpOptions> options = ClientOptions(
      admin ? transport::Role::kAdmin : transport::Role::kJob,
      admin ? std::string("dmg-status")
            : absl::StrFormat("dmg-status-%s-%d", host, getpid()));
  if (!options.ok()) {
    st.line =
        absl::StrFormat("memory node %s (position %d): %s", node.ToString(),
                        position, options.status().message());
    return st;
  }
  absl::StatusOr<std::unique_ptr<transport::TcpControl>> c =
      transport::TcpControl::Connect({node}, *options);
  if (absl::IsPermissionDenied(c.status())) {
    // It answered: running, but this client may not ask it anything.
    st.line = absl::StrFormat(
        "memory node %s (position %d): up, but it refused this client: %s",
        node.ToString(), position, c.status().message());
    return st;
  }
  if (!c.ok()) {
    st.line = absl::StrFormat("memory node %s (position %d): down: %s",
                              node.ToString(), position, c.status().message());
    return st;
  }
  absl::StatusOr<std::vector<transport::RegionInfo>> regions = (*c)->List(0);
  if (!regions.ok()) {
    st.line =
        absl::StrFormat("memory node %s (position %d): down: %s",
                        node.ToString(), position, regions.status().message());
    return st;
  }
  st.up = true;
  uint64_t store_bytes = 0, other_bytes = 0;
  int others = 0;
  for (const transport::RegionInfo& r : *regions) {
    if (r.id == transport::kStoreRegion) {
      st.has_store = true;
      store_bytes = r.length;
    } else {
      other_bytes += r.length;
      ++others;
    }
  }
  const uint32_t id = (*c)->reported_id(0);
  st.node = node;
  if (st.has_store) {
    absl::StatusOr<transport::TcpControl::StoreInfo> info =
        (*c)->GetStoreInfo(0);
    if (info.ok()) st.store = *info;
  }
  st.line = absl::StrFormat(
      "memory node %s (position %d): up, node id %d%s; %s; %d job regions "
      "(%.1f MB)",
      node.ToString(), position, id,
      st.has_store && id != position ? " (does not match its position)" : "",
      st.has_store
          ? absl::StrFormat(
                "store loaded (%.1f MB%s)", store_bytes / 1e6,
                st.store && st.store->restored_snapshot != 0
                    ? absl::StrFormat(", from snapshot %d at its restart",
                                      st.store->restored_snapshot)
                    : std::string())
          : std::string("no store loaded"),
      others, other_bytes / 1e6);
  if (st.has_store && id != position) st.has_store = false;
  return st;
}

std::vector<std::string> StatusFlagNames() {
  return {"memory_nodes", "wait_ms", "require_store", "transport_timeout_ms",
          "secret_file"};
}

int StatusCommand() {
  absl::StatusOr<std::vector<transport::HostPort>> nodes =
      transport::ParseHostPorts(FLAGS_memory_nodes);
  if (!nodes.ok()) return ReportError(nodes.status());
  if (nodes->empty()) {
    return ReportError(absl::InvalidArgumentError(
        "dmg status needs --memory_nodes=HOST:PORT,..."));
  }
  if (FLAGS_wait_ms < 0) {
    return ReportError(absl::InvalidArgumentError("--wait_ms must be >= 0"));
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(FLAGS_wait_ms);
  while (true) {
    std::vector<MemoryNodeStatus> all;
    bool ready = true;
    for (uint32_t i = 0; i < nodes->size(); ++i) {
      all.push_back(AskMemoryNode((*nodes)[i], i));
      ready = ready && all.back().up &&
              (!FLAGS_require_store || all.back().has_store);
    }
    // Stores of different loads: a job would be refused, so not ready.
    std::string mixed;
    for (const MemoryNodeStatus& st : all) {
      if (!st.store || !all[0].store) continue;
      if (st.store->load_id != all[0].store->load_id) {
        mixed = DifferentLoads(all[0].node, *all[0].store, st.node, *st.store);
        ready = ready && !FLAGS_require_store;
        break;
      }
    }
    if (ready || std::chrono::steady_clock::now() >= deadline) {
      for (const MemoryNodeStatus& st : all)
        std::printf("%s\n", st.line.c_str());
      if (!mixed.empty()) std::printf("%s\n", mixed.c_str());
      std::printf("%s\n", ready ? "ready" : "not ready");
      return ready ? kExitOk : kExitFailure;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace dmg::cli
