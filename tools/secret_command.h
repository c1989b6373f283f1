// `dmg secret --output=FILE`: writes a new cluster secret (mode 0600) for
// `dmg memory-node`, `dmg load` and `dmg run --secret_file=FILE`.
// `dmg secret --job_only --secret_file=CLUSTER --output=FILE` writes the job
// key derived from it: compute nodes holding only that can run jobs, but not
// load a store or stop a memory node (transport/auth.h).
#ifndef DMG_TOOLS_SECRET_COMMAND_H_
#define DMG_TOOLS_SECRET_COMMAND_H_

#include <string>
#include <vector>

namespace dmg::cli {

std::vector<std::string> SecretFlagNames();
int SecretCommand();

}  // namespace dmg::cli

#endif  // DMG_TOOLS_SECRET_COMMAND_H_
