// The flags every command that takes --graph shares.
#ifndef DMG_TOOLS_GRAPH_FLAGS_H_
#define DMG_TOOLS_GRAPH_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gflags/gflags.h"
#include "store/graph_source.h"
#include "store/store_image.h"

DECLARE_string(graph);
DECLARE_int32(threads);

namespace dmg::cli {

// Names of the graph-source flags, for ParseFlags' allow-list.
std::vector<std::string> GraphFlagNames();

// GraphSourceOptions from the flags; checks --graph is set.
absl::StatusOr<store::GraphSourceOptions> GraphSourceOptionsFromFlags();

// A store image keeps the layout it was written with: a layout flag given
// explicitly that the loaded store does not have (--graph named an image
// laid out otherwise) is an error, not silently ignored.
absl::Status CheckLayoutFlags(const store::StoreImage& image);

}  // namespace dmg::cli

#endif  // DMG_TOOLS_GRAPH_FLAGS_H_
