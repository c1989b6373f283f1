// `dmg status --memory_nodes=H:P,...`: asks every memory node over the
// control plane whether it is up and what it holds (for launchers: readiness
// is an answer, not a line in a log). Exit 0 when all are ready, else 1.
#ifndef DMG_TOOLS_STATUS_COMMAND_H_
#define DMG_TOOLS_STATUS_COMMAND_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "transport/tcp_transport.h"

namespace dmg::cli {

// One memory node's answer on the control plane (also used by dmg doctor).
struct MemoryNodeStatus {
  bool up = false;
  bool has_store = false;  // a store is loaded and its id matches position
  std::string line;        // "memory node H:P (position K): up, ..."
  transport::HostPort node;
  std::optional<transport::TcpControl::StoreInfo> store;  // when it has one
};
// Asks `node` (listed at `position`) with --transport_timeout_ms.
MemoryNodeStatus AskMemoryNode(const transport::HostPort& node,
                               uint32_t position);

std::vector<std::string> StatusFlagNames();
int StatusCommand();

}  // namespace dmg::cli

#endif  // DMG_TOOLS_STATUS_COMMAND_H_
