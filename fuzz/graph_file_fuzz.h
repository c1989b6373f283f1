// The body of the graph-file fuzz targets (read_*_fuzzer.cc): the input's
// bytes become a file of a given name (its extension picks the reader, as
// on the command line), which is read (store/reader.*, input_file.*) and
// then turned into a store image through graph_source (clean, CSR, layout).
// Checks: no crash, leak or sanitizer report; a read edge list is
// consistent (ids below num_vertices, one weight per arc or none, within
// the ReadOptions bound); an image built from it passes the full
// validation a file or peer's image gets, and decodes back to its arcs.
#ifndef DMG_FUZZ_GRAPH_FILE_FUZZ_H_
#define DMG_FUZZ_GRAPH_FILE_FUZZ_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/aligned_buffer.h"
#include "fuzz/fuzz_util.h"
#include "store/graph_source.h"
#include "store/reader.h"
#include "store/store_image.h"

namespace dmg::fuzz {

// Bounds that keep one input cheap (a vertex costs ~48 bytes downstream).
inline constexpr uint64_t kFuzzMaxVertices = uint64_t{1} << 16;

inline int FuzzGraphFile(const uint8_t* data, size_t size,
                         const std::string& name) {
  static const bool quiet = (QuietLogging(), true);
  (void)quiet;
  const std::string path = WriteScratchFile(name, data, size);

  store::ReadOptions read;
  read.max_vertices = kFuzzMaxVertices;
  read.memory_bytes = uint64_t{1} << 30;
  read.max_input_bytes = uint64_t{64} << 20;  // not the host's memory room
  absl::StatusOr<store::EdgeList> edges = store::ReadGraphFile(path, read);
  if (!edges.ok()) return 0;  // an error is a fine answer to bad bytes
  FUZZ_CHECK(edges->num_vertices <= kFuzzMaxVertices);
  FUZZ_CHECK(edges->src.size() == edges->dst.size());
  FUZZ_CHECK(edges->weights.empty() ||
             edges->weights.size() == edges->src.size());
  for (size_t i = 0; i < edges->src.size(); ++i) {
    FUZZ_CHECK(edges->src[i] < edges->num_vertices);
    FUZZ_CHECK(edges->dst[i] < edges->num_vertices);
  }

  // The rest of the pipeline, with options drawn from the input's size (so
  // an input always runs the same way): cleaning variants, small blocks (a
  // few of them, and split pieces), plain or compressed.
  store::GraphSourceOptions options;
  options.read = read;
  options.threads = 1;
  options.clean.symmetrize = size & 1;
  options.clean.relabel = size & 2;
  options.layout.compress = size & 4;
  options.layout.block_size = (size & 8) ? 256 : 1024;
  absl::StatusOr<store::StoreImage> image = store::LoadStore(path, options);
  if (!image.ok()) return 0;
  const std::span<const std::byte> bytes = image->bytes();
  AlignedBuffer copy(bytes.size());
  std::memcpy(copy.data(), bytes.data(), bytes.size());
  absl::StatusOr<store::StoreImage> again = store::StoreImage::FromBuffer(
      std::move(copy), "fuzz", store::StoreImage::Validation::kFull);
  FUZZ_CHECK(again.ok());
  const store::Graph graph = store::GraphFromImage(*again);
  FUZZ_CHECK(graph.num_arcs() == image->num_arcs());
  FUZZ_CHECK(graph.num_vertices() == image->num_vertices());
  FUZZ_CHECK(graph.in.num_arcs() == graph.out.num_arcs());
  return 0;
}

}  // namespace dmg::fuzz

#endif  // DMG_FUZZ_GRAPH_FILE_FUZZ_H_
