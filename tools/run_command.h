// `dmg run`: one algorithm on one graph, on the embedded cluster (or, later,
// on running memory nodes), with optional output, statistics and
// verification against the in-memory reference.
#ifndef DMG_TOOLS_RUN_COMMAND_H_
#define DMG_TOOLS_RUN_COMMAND_H_

#include <string>
#include <vector>

#include "tools/help.h"

namespace dmg::cli {

// Every flag `dmg run` accepts, in the groups its help shows.
std::vector<FlagGroup> RunFlagGroups();
// One line per algorithm (name, what it computes, its flags), from the
// registry, for `dmg help`.
std::string AlgorithmHelp();
int RunCommand();

}  // namespace dmg::cli

#endif  // DMG_TOOLS_RUN_COMMAND_H_
