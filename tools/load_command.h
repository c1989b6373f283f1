// `dmg load`: ingest a graph once into a store image file or into running
// memory nodes.
#ifndef DMG_TOOLS_LOAD_COMMAND_H_
#define DMG_TOOLS_LOAD_COMMAND_H_

#include <string>
#include <vector>

namespace dmg::cli {

std::vector<std::string> LoadFlagNames();
int LoadCommand();

}  // namespace dmg::cli

#endif  // DMG_TOOLS_LOAD_COMMAND_H_
