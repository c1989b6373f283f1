#include "store/graph_source.h"

#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_format.h"
#include "store/build_graph.h"
#include "store/generator.h"
#include "store/image_file.h"
#include "store/input_file.h"
#include "store/reader.h"

namespace dmg::store {

Csr CsrFromImage(const StoreImage& image, Direction direction) {
  Csr csr;
  csr.num_vertices = image.num_vertices();
  csr.offsets.assign(csr.num_vertices + 1, 0);
  csr.targets.resize(image.num_arcs());
  if (image.weighted()) csr.weights.resize(image.num_arcs());
  for (const DirectoryEntry& e : image.directory(direction)) {
    BlockView block = image.block(direction, e);
    for (uint32_t i = 0; i < e.vertex_count; ++i) {
      VertexId v = e.first_vertex + i;
      csr.offsets[v + 1] += block.targets(v).size();
    }
    std::span<const VertexId> t = block.all_targets();
    if (t.empty()) continue;  // memcpy from a null span is undefined
    std::memcpy(csr.targets.data() + e.first_edge, t.data(),
                t.size() * sizeof(VertexId));
    if (image.weighted()) {
      std::span<const Weight> w = block.weights(e.first_vertex);
      // Weights of the whole block are contiguous from its first vertex.
      std::memcpy(csr.weights.data() + e.first_edge, w.data(),
                  t.size() * sizeof(Weight));
    }
  }
  for (uint64_t v = 0; v < csr.num_vertices; ++v) {
    csr.offsets[v + 1] += csr.offsets[v];
  }
  return csr;
}

Graph GraphFromImage(const StoreImage& image) {
  Graph g;
  g.out = CsrFromImage(image, Direction::kOut);
  g.in = CsrFromImage(image, Direction::kIn);
  const Superblock& sb = image.superblock();
  g.report = {sb.input_arcs, sb.self_loops_removed, sb.parallel_arcs_removed,
              sb.arcs_added_by_symmetrize, 0};
  return g;
}

absl::StatusOr<Graph> LoadGraph(const std::string& spec,
                                const GraphSourceOptions& options) {
  if (spec.empty()) return absl::InvalidArgumentError("--graph is empty");
  if (IsGeneratorSpec(spec)) {
    absl::StatusOr<GeneratorParams> params =
        ParseGeneratorSpec(spec, options.seed);
    if (!params.ok()) return params.status();
    const uint64_t n = uint64_t{1} << params->scale;
    if (n > options.read.max_vertices) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: makes %d vertices, more than --max_vertices=%d (raise it to "
          "generate this graph)",
          spec, n, options.read.max_vertices));
    }
    return BuildGraph(Generate(*params, options.threads), options.clean,
                      options.threads);
  }
  if (absl::Status s = CheckRegularFile(spec); !s.ok()) return s;
  if (LooksLikeStoreImage(spec)) {
    absl::StatusOr<StoreImage> image = ReadImageFile(spec);
    if (!image.ok()) return image.status();
    return GraphFromImage(*image);
  }
  ReadOptions read = options.read;
  if (options.clean.relabel) {
    // Ids are compacted: sparse large ids cost nothing per id (the relabel
    // map is as large as the arcs), so the bound is on the count after it.
    read.max_vertices = kMaxVertexId + 1;
    read.memory_bytes = std::numeric_limits<uint64_t>::max();
  }
  absl::StatusOr<EdgeList> edges = ReadGraphFile(spec, read);
  if (!edges.ok()) return edges.status();
  absl::StatusOr<Graph> graph =
      BuildGraph(*std::move(edges), options.clean, options.threads);
  if (graph.ok() && graph->num_vertices() > options.read.max_vertices) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %d vertices after relabelling, more than --max_vertices=%d "
        "(raise it to read this graph)",
        spec, graph->num_vertices(), options.read.max_vertices));
  }
  return graph;
}

absl::StatusOr<StoreImage> LoadStore(const std::string& spec,
                                     const GraphSourceOptions& options) {
  if (!IsGeneratorSpec(spec) && CheckRegularFile(spec).ok() &&
      LooksLikeStoreImage(spec)) {
    absl::StatusOr<StoreImage> image = ReadImageFile(spec);
    // An image is served as it is, but compressed on request: its blocks
    // are laid out again (the graph read back from them).
    if (!image.ok() || !options.layout.compress || image->compressed()) {
      return image;
    }
    LayoutOptions layout = options.layout;
    if (layout.threads <= 0) layout.threads = options.threads;
    return BuildStoreImage(GraphFromImage(*image), layout);
  }
  absl::StatusOr<Graph> graph = LoadGraph(spec, options);
  if (!graph.ok()) return graph.status();
  LayoutOptions layout = options.layout;
  if (layout.threads <= 0) layout.threads = options.threads;
  return BuildStoreImage(*graph, layout);
}

}  // namespace dmg::store
