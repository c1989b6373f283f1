// `dmg help CMD` and `dmg CMD --help`: every flag a command accepts, with its
// description and default, in groups. The groups are also the command's list
// of accepted flags, so the help cannot drift from what the parser takes.
#ifndef DMG_TOOLS_HELP_H_
#define DMG_TOOLS_HELP_H_

#include <map>
#include <string>
#include <vector>

namespace dmg::cli {

struct FlagGroup {
  std::string title;
  std::vector<std::string> flags;  // gflags names, without "--"
  // A flag shared by commands that means something else in this one (dmg
  // memory-node's --transport: tcp by default, not dmg run's local): its
  // description and default as this command's help shows them.
  struct Own {
    std::string description;
    std::string default_value;
  };
  std::map<std::string, Own> own = {};
};

// Every flag of every group, in order, without repeats.
std::vector<std::string> FlagNames(const std::vector<FlagGroup>& groups);

// One block per group: "  --name=TYPE  description (default: X)", the
// description wrapped under the flag when it does not fit in 80 columns.
std::string FormatFlagGroups(const std::vector<FlagGroup>& groups);

}  // namespace dmg::cli

#endif  // DMG_TOOLS_HELP_H_
