// Fuzzes the store image loader (store/image_file.*, store_image.*): the
// input is a file named *.img, read and fully validated by ReadImageFile
// (superblock, region table, checksums, directories, every block). An error
// is fine; an image that passes must be safe to use: every block of both
// directions is walked (targets below num_vertices, weights where the image
// says so), decoded back into a graph, and served as dmg load would
// (LoadStore: laid out again, compressed, when its blocks are plain).
// Seeds: valid images, plain and compressed, weighted and not (make_corpus).
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_util.h"
#include "store/graph_source.h"
#include "store/image_file.h"

namespace {

using dmg::store::Direction;

void Walk(const dmg::store::StoreImage& image, Direction d) {
  uint64_t arcs = 0;
  for (const dmg::store::DirectoryEntry& e : image.directory(d)) {
    const dmg::store::BlockView block = image.block(d, e);
    for (uint32_t i = 0; i < block.vertex_count(); ++i) {
      const dmg::store::VertexId v = block.first_vertex() + i;
      for (dmg::store::VertexId t : block.targets(v)) {
        FUZZ_CHECK(t < image.num_vertices());
      }
      if (image.weighted()) {
        FUZZ_CHECK(block.weights(v).size() == block.targets(v).size());
      }
    }
    arcs += block.edge_count();
  }
  FUZZ_CHECK(arcs == image.num_arcs());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = (dmg::fuzz::QuietLogging(), true);
  (void)quiet;
  const std::string path =
      dmg::fuzz::WriteScratchFile("input.img", data, size);
  absl::StatusOr<dmg::store::StoreImage> image =
      dmg::store::ReadImageFile(path);
  if (!image.ok()) return 0;
  Walk(*image, Direction::kOut);
  Walk(*image, Direction::kIn);
  const dmg::store::Graph graph = dmg::store::GraphFromImage(*image);
  FUZZ_CHECK(graph.num_arcs() == image->num_arcs());
  FUZZ_CHECK(graph.in.num_arcs() == image->num_arcs());

  dmg::store::GraphSourceOptions options;
  options.threads = 1;
  options.layout.compress = true;
  absl::StatusOr<dmg::store::StoreImage> served =
      dmg::store::LoadStore(path, options);
  FUZZ_CHECK(served.ok());
  FUZZ_CHECK(served->num_arcs() == image->num_arcs());
  return 0;
}
