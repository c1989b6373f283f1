#include "tools/version.h"

#include "absl/strings/str_cat.h"
#include "dmg_version.h"

namespace dmg::cli {

std::string VersionString() {
  return absl::StrCat(DMG_VERSION, " (git ", DMG_GIT_REVISION, ")");
}

std::string VersionReport() {
  return absl::StrCat(
      "dmg ", DMG_VERSION, "\n", "git revision: ", DMG_GIT_REVISION, "\n",
      "build type:   ", DMG_BUILD_TYPE, "\n",
      "CUDA:         ", DMG_BUILT_WITH_CUDA ? "on" : "off (built without nvcc)",
      "\n",
      "RDMA:         ", DMG_BUILT_WITH_RDMA ? "on (ibverbs, rdma_cm)" : "off",
      "\n");
}

}  // namespace dmg::cli
