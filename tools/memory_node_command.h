// `dmg memory-node`: the memory-node daemon.
#ifndef DMG_TOOLS_MEMORY_NODE_COMMAND_H_
#define DMG_TOOLS_MEMORY_NODE_COMMAND_H_

#include <string>
#include <vector>

namespace dmg::cli {

std::vector<std::string> MemoryNodeFlagNames();
int MemoryNodeCommand();

}  // namespace dmg::cli

#endif  // DMG_TOOLS_MEMORY_NODE_COMMAND_H_
