// Graph file readers: SNAP/.el/.txt edge lists, .wel, Matrix Market .mtx,
// DIMACS-9 .gr (p sp) and PACE .gr (p tw). Compressed files (gzip, xz) are
// accepted. Errors are one line: "FILE:LINE: what is wrong".
#ifndef DMG_STORE_READER_H_
#define DMG_STORE_READER_H_

#include <string>

#include "absl/status/statusor.h"
#include "store/graph.h"

namespace dmg::store {

// Reads `path` into an edge list. The format is chosen by extension (after
// stripping .gz/.xz), falling back to sniffing the content. Ids are converted
// to 0-based. num_vertices is the largest id + 1, or the count a header
// declares when that is larger.
absl::StatusOr<EdgeList> ReadGraphFile(const std::string& path);

}  // namespace dmg::store

#endif  // DMG_STORE_READER_H_
