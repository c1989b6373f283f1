// Graph file readers: SNAP/.el/.txt edge lists, .wel, Matrix Market .mtx,
// DIMACS-9 .gr (p sp) and PACE .gr (p tw). Compressed files (gzip, xz) are
// accepted. Errors are one line: "FILE:LINE: what is wrong".
#ifndef DMG_STORE_READER_H_
#define DMG_STORE_READER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/memory_limits.h"
#include "store/graph.h"
#include "store/input_file.h"

namespace dmg::store {

// Rough bytes of memory one vertex costs from reading to a laid-out image
// (CSR offsets both ways, cleaning's scratch, block offsets): what a declared
// or inferred vertex count is checked against before anything is allocated.
inline constexpr uint64_t kBytesPerVertexEstimate = 48;

struct ReadOptions {
  // A count a header declares, or a vertex id + 1, above this is refused at
  // its line (the message names --max_vertices, the flag that sets it).
  uint64_t max_vertices = uint64_t{1} << 31;
  // Memory the graph may take; a vertex count needing more (at
  // kBytesPerVertexEstimate a vertex) is refused at its line. 0: the room
  // ReadMemoryRoom finds (the least of MemAvailable and the cgroup's
  // limits; unknown there: no memory check).
  uint64_t memory_bytes = 0;
  // The most bytes the file, and what it decompresses to, may take
  // (--max_input_bytes); past it the read stops with an error naming the
  // flag. 0: DefaultMaxInputBytes.
  uint64_t max_input_bytes = 0;
  // Refuse the first negative weight, at its line (for algorithms that need
  // non-negative weights; used to locate one after the fact).
  bool reject_negative_weights = false;
};

// The text of a graph is held in memory while its arcs are parsed into
// about as many bytes again, then laid out: a text past half the memory
// this process may take cannot be loaded, so that is the default bound
// (and a gzip bomb stops there).
inline constexpr uint64_t kInputShareOfRoom = 2;
// The default when the memory is unknown (no /proc): large enough for any
// graph a single host loads.
inline constexpr uint64_t kUnknownRoomMaxInputBytes = uint64_t{64} << 30;

// The --max_input_bytes a read with options.max_input_bytes == 0 uses, and
// how it was chosen (for messages): ReadMemoryRoom's bytes /
// kInputShareOfRoom, or kUnknownRoomMaxInputBytes.
InputBound DefaultMaxInputBytes(const MemoryRoom& room);

// Reads `path` into an edge list. The format is chosen by extension (after
// stripping .gz/.xz), falling back to sniffing the content. Ids are converted
// to 0-based. num_vertices is the largest id + 1, or the count a header
// declares when that is larger. Only regular files are read.
absl::StatusOr<EdgeList> ReadGraphFile(const std::string& path,
                                       const ReadOptions& options = {});

}  // namespace dmg::store

#endif  // DMG_STORE_READER_H_
