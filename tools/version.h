// What `dmg --version` prints: the release, the git revision the binary was
// built from ("-dirty": with uncommitted changes), the build type and the
// optional parts compiled in.
#ifndef DMG_TOOLS_VERSION_H_
#define DMG_TOOLS_VERSION_H_

#include <string>

namespace dmg::cli {

// "0.1.0 (git 1a2b3c4d5e6f)"
std::string VersionString();
// Several lines: version, revision, build type, CUDA and RDMA on/off.
std::string VersionReport();

}  // namespace dmg::cli

#endif  // DMG_TOOLS_VERSION_H_
