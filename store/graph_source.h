// Turns a graph SPEC — a file in any supported format, a store image, or a
// generator such as kron:20 — into a graph or a store image. Everything that
// takes --graph goes through here, so every command accepts every SPEC.
#ifndef DMG_STORE_GRAPH_SOURCE_H_
#define DMG_STORE_GRAPH_SOURCE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "store/graph.h"
#include "store/layout.h"
#include "store/reader.h"
#include "store/store_image.h"

namespace dmg::store {

struct GraphSourceOptions {
  CleanOptions clean;
  LayoutOptions layout;
  // Bounds on the vertex count of a file or generator (--max_vertices, the
  // memory available), checked before anything is allocated.
  ReadOptions read;
  uint64_t seed = 1;  // generators only
  int threads = 0;    // <= 0: all cores
};

// The cleaned graph in CSR form. For a store image the CSR is decoded from
// its blocks (cleaning options do not apply: the image is already clean).
absl::StatusOr<Graph> LoadGraph(const std::string& spec,
                                const GraphSourceOptions& options);

// The store image: read (and validated) for an image file (laid out again,
// compressed, when options.layout.compress asks and its blocks are plain),
// else built from LoadGraph's result with options.layout.
absl::StatusOr<StoreImage> LoadStore(const std::string& spec,
                                     const GraphSourceOptions& options);

// The graph's fingerprint (docs/STORE_FORMAT.md, "Fingerprint"): the
// source a store built from SPEC records — a generator spec as given, or a
// file's name without its folder, then the flags that shape the graph when
// they differ from their defaults (" --seed=2 --symmetrize").
std::string SourceName(const std::string& spec,
                       const GraphSourceOptions& options);

// OK if SPEC read with `options` is the graph whose store has superblock
// `loaded` (on memory nodes): the same source name (and, for a file that
// is here, the same size); for a store image file, the same arcs. Else
// InvalidArgument naming both graphs. A store that records no source
// (written before fingerprints) is not checked.
absl::Status CheckSameGraph(const std::string& spec,
                            const GraphSourceOptions& options,
                            const Superblock& loaded);

// Decodes one direction of an image back into a CSR.
Csr CsrFromImage(const StoreImage& image, Direction direction);
// Both directions and the cleaning report, read back from an image.
Graph GraphFromImage(const StoreImage& image);

}  // namespace dmg::store

#endif  // DMG_STORE_GRAPH_SOURCE_H_
