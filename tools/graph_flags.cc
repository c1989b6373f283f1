#include "tools/graph_flags.h"

#include "absl/strings/str_format.h"
#include "store/block_format.h"

DEFINE_string(
    graph, "",
    "graph SPEC: a file (.el/.txt/.wel/.mtx/.gr, optionally .gz/.xz), "
    "a store image, or a generator kron:SCALE[:DEGREE] / "
    "urand:SCALE[:DEGREE]");
DEFINE_int32(threads, 0, "worker threads (0: all cores)");
DEFINE_uint64(seed, 1, "seed for generated graphs");
DEFINE_bool(symmetrize, false, "add the reverse of every arc (undirected)");
DEFINE_bool(drop_self_loops, true, "remove arcs (v,v)");
DEFINE_bool(drop_parallel_arcs, true,
            "keep one arc per (u,v): the one with the smallest weight");
DEFINE_bool(relabel, false,
            "compact vertex ids: the i-th smallest id that occurs becomes i");
DEFINE_uint32(block_size, dmg::store::kDefaultBlockSize,
              "store block size in bytes (multiple of 8, 256..1048576)");
DEFINE_bool(
    compress, false,
    "compressed blocks: delta + bit-packed neighbour ids (fewer bytes to "
    "hold and move; decoded on the compute node)");
DEFINE_uint64(max_vertices, uint64_t{1} << 31,
              "refuse a graph file that declares or uses more vertices than "
              "this (checked before allocating; the memory available is "
              "checked too), up to 4294967295");
DEFINE_uint64(max_input_bytes, 0,
              "refuse a graph file larger than this, or one that "
              "decompresses (gzip, xz) to more, before the memory is used "
              "(0: half the memory this process may take, the least of "
              "MemAvailable and its cgroup's limit; 64 GiB when unknown)");
DEFINE_uint32(layout_memory_nodes, 1,
              "number of memory nodes the layout stripes blocks over");

namespace dmg::cli {

std::vector<std::string> GraphFlagNames() {
  return {"graph",      "threads",         "seed",
          "symmetrize", "drop_self_loops", "drop_parallel_arcs",
          "relabel",    "block_size",      "layout_memory_nodes",
          "compress",   "max_vertices",    "max_input_bytes"};
}

absl::StatusOr<store::GraphSourceOptions> GraphSourceOptionsFromFlags() {
  if (FLAGS_graph.empty()) {
    return absl::InvalidArgumentError(
        "--graph=SPEC is required (a file, a store image, or kron:SCALE)");
  }
  if (FLAGS_threads < 0) {
    return absl::InvalidArgumentError("--threads must be >= 0");
  }
  if (FLAGS_max_vertices == 0 || FLAGS_max_vertices > store::kMaxVertexId + 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--max_vertices must be in 1..%d (vertex ids are "
                        "32-bit)",
                        store::kMaxVertexId + 1));
  }
  store::GraphSourceOptions o;
  o.read.max_vertices = FLAGS_max_vertices;
  o.read.max_input_bytes = FLAGS_max_input_bytes;
  o.seed = FLAGS_seed;
  o.threads = FLAGS_threads;
  o.clean.symmetrize = FLAGS_symmetrize;
  o.clean.drop_self_loops = FLAGS_drop_self_loops;
  o.clean.drop_parallel_arcs = FLAGS_drop_parallel_arcs;
  o.clean.relabel = FLAGS_relabel;
  o.layout.block_size = FLAGS_block_size;
  o.layout.num_memory_nodes = FLAGS_layout_memory_nodes;
  o.layout.threads = FLAGS_threads;
  o.layout.compress = FLAGS_compress;
  return o;
}

absl::Status CheckLayoutFlags(const store::StoreImage& image) {
  const store::Superblock sb = image.superblock();
  auto given = [](const char* flag) {
    return !gflags::GetCommandLineFlagInfoOrDie(flag).is_default;
  };
  if (given("layout_memory_nodes") &&
      sb.num_memory_nodes != FLAGS_layout_memory_nodes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--layout_memory_nodes=%d, but %s is laid out for %d memory node(s): "
        "an image keeps its layout; write a new one from the source graph "
        "(dmg load --graph=SOURCE --layout_memory_nodes=%d --image=FILE)",
        FLAGS_layout_memory_nodes, FLAGS_graph, sb.num_memory_nodes,
        FLAGS_layout_memory_nodes));
  }
  if (given("block_size") && sb.block_size != FLAGS_block_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--block_size=%d, but %s has %d-byte blocks: an image keeps its "
        "layout; write a new one from the source graph",
        FLAGS_block_size, FLAGS_graph, sb.block_size));
  }
  return absl::OkStatus();
}

}  // namespace dmg::cli
