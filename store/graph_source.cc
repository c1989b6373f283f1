#include "store/graph_source.h"

#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
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

std::string SourceName(const std::string& spec,
                       const GraphSourceOptions& options) {
  const bool generated = IsGeneratorSpec(spec);
  std::string name =
      generated ? spec : std::filesystem::path(spec).filename().string();
  if (generated && options.seed != 1) {
    absl::StrAppend(&name, " --seed=", options.seed);
  }
  const CleanOptions& c = options.clean;
  if (c.symmetrize) absl::StrAppend(&name, " --symmetrize");
  if (!c.drop_self_loops) absl::StrAppend(&name, " --nodrop_self_loops");
  if (!c.drop_parallel_arcs) absl::StrAppend(&name, " --nodrop_parallel_arcs");
  if (c.relabel) absl::StrAppend(&name, " --relabel");
  return name;
}

namespace {

uint64_t FileBytes(const std::string& path) {
  std::error_code error;
  const uint64_t bytes = std::filesystem::file_size(path, error);
  return error ? 0 : bytes;
}

bool IsImageSpec(const std::string& spec) {
  return !IsGeneratorSpec(spec) && CheckRegularFile(spec).ok() &&
         LooksLikeStoreImage(spec);
}

// An image file read for the store: laid out again when options ask for
// compressed blocks; its fingerprint kept (or, from an image written
// before fingerprints, its file's name).
absl::StatusOr<StoreImage> LoadImageFile(const std::string& spec,
                                         const GraphSourceOptions& options) {
  absl::StatusOr<StoreImage> image = ReadImageFile(spec);
  if (!image.ok()) return image;
  std::string source(SourceOf(image->superblock()));
  uint64_t source_bytes = image->superblock().source_bytes;
  if (source.empty()) {
    source = std::filesystem::path(spec).filename().string();
    source_bytes = FileBytes(spec);
  }
  if (options.layout.compress && !image->compressed()) {
    LayoutOptions layout = options.layout;
    if (layout.threads <= 0) layout.threads = options.threads;
    image = BuildStoreImage(GraphFromImage(*image), layout);
    if (!image.ok()) return image;
  }
  image->SetSource(source, source_bytes);
  return image;
}

}  // namespace

absl::StatusOr<StoreImage> LoadStore(const std::string& spec,
                                     const GraphSourceOptions& options) {
  if (IsImageSpec(spec)) return LoadImageFile(spec, options);
  absl::StatusOr<Graph> graph = LoadGraph(spec, options);
  if (!graph.ok()) return graph.status();
  LayoutOptions layout = options.layout;
  if (layout.threads <= 0) layout.threads = options.threads;
  absl::StatusOr<StoreImage> image = BuildStoreImage(*graph, layout);
  if (image.ok()) {
    image->SetSource(SourceName(spec, options),
                     IsGeneratorSpec(spec) ? 0 : FileBytes(spec));
  }
  return image;
}

absl::Status CheckSameGraph(const std::string& spec,
                            const GraphSourceOptions& options,
                            const Superblock& loaded) {
  const std::string_view held = SourceOf(loaded);
  if (held.empty()) return absl::OkStatus();
  std::string given = SourceName(spec, options);
  std::string why;
  if (IsImageSpec(spec)) {
    // An image names its graph itself; equal digests are the same arcs.
    absl::StatusOr<Superblock> sb = ReadSuperblock(spec);
    if (!sb.ok()) return sb.status();
    if (!SourceOf(*sb).empty()) given = std::string(SourceOf(*sb));
    if (sb->arc_digest != 0 && sb->arc_digest == loaded.arc_digest &&
        sb->num_vertices == loaded.num_vertices) {
      return absl::OkStatus();
    }
    if (sb->arc_digest != 0) why = ", other arcs";
  } else if (given == held && !IsGeneratorSpec(spec) &&
             CheckRegularFile(spec).ok()) {
    if (const uint64_t bytes = FileBytes(spec); bytes != loaded.source_bytes) {
      why = absl::StrFormat(", the file %d bytes, the one loaded %d", bytes,
                            loaded.source_bytes);
    }
  }
  if (given == held && why.empty()) return absl::OkStatus();
  const std::string read_as =
      given == spec && why.empty() ? "" : absl::StrCat(" (", given, why, ")");
  return absl::InvalidArgumentError(absl::StrFormat(
      "--graph=%s%s is not the graph the memory nodes hold (%s: %d "
      "vertices, %d arcs); give that graph, or leave --graph out to run on "
      "the loaded one",
      spec, read_as, held, loaded.num_vertices, loaded.num_arcs));
}

}  // namespace dmg::store
