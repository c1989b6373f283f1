// `dmg status --memory_nodes=H:P,...`: asks every memory node over the
// control plane whether it is up and what it holds (for launchers: readiness
// is an answer, not a line in a log). Exit 0 when all are ready, else 1.
#ifndef DMG_TOOLS_STATUS_COMMAND_H_
#define DMG_TOOLS_STATUS_COMMAND_H_

#include <string>
#include <vector>

namespace dmg::cli {

std::vector<std::string> StatusFlagNames();
int StatusCommand();

}  // namespace dmg::cli

#endif  // DMG_TOOLS_STATUS_COMMAND_H_
