// `dmg snapshot --memory_nodes=H:P,... [--jobs]`: asks every memory node to
// write a snapshot now into its --snapshot_dir (the admin role: it needs
// the cluster secret), with the state of the jobs it keeps for --resume
// when --jobs, and prints what each wrote once it is in place. Exit 0 when
// every node wrote one, 1 when one failed, 2 on bad flags or a refusal.
#ifndef DMG_TOOLS_SNAPSHOT_COMMAND_H_
#define DMG_TOOLS_SNAPSHOT_COMMAND_H_

#include <string>
#include <vector>

namespace dmg::cli {

std::vector<std::string> SnapshotFlagNames();
int SnapshotCommand();

}  // namespace dmg::cli

#endif  // DMG_TOOLS_SNAPSHOT_COMMAND_H_
