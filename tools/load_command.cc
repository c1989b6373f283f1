#include "tools/load_command.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_format.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "store/graph_source.h"
#include "store/image_file.h"
#include "tools/cli.h"
#include "tools/graph_flags.h"
#include "tools/progress.h"
#include "tools/transport_flags.h"
#include "transport/tcp_transport.h"

DEFINE_string(image, "",
              "store image file to write (dmg load) or serve "
              "(dmg memory-node)");
DEFINE_string(memory_nodes, "",
              "host:port,... of running memory nodes (dmg load / dmg run)");
DECLARE_int32(transport_timeout_ms);
DECLARE_uint32(layout_memory_nodes);

DEFINE_bool(force, false,
            "load: replace stores that running jobs are using (those jobs "
            "then fail with an error; they never read a mix of two graphs)");

namespace dmg::cli {
namespace {

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

// A load is a transaction per node: each node's slice is written, in
// batches of WRITEs over the tcp data plane, into a staging region beside
// the store it serves, and only once every node has its new slice are they
// switched (kCommitStore). A load that fails or is killed before that
// leaves every node serving its old store (a staging region dies with the
// loader's connection). Jobs pin the store they started on: a load is
// refused while one runs (checked on every node before anything is
// written), unless --force, which makes those jobs fail instead. Every node
// records the load's id, and a job refuses nodes whose ids differ.
absl::Status Upload(const store::StoreImage& image,
                    const std::vector<transport::HostPort>& nodes) {
  const uint8_t force = FLAGS_force ? transport::wire::kCommitForce : 0;
  // Creating and writing a store needs the admin role.
  absl::StatusOr<transport::TcpOptions> options =
      ClientOptions(transport::Role::kAdmin, "dmg-load");
  if (!options.ok()) return options.status();
  absl::StatusOr<std::unique_ptr<transport::TcpTransport>> t =
      transport::TcpTransport::Connect(nodes, *options);
  if (!t.ok()) return t.status();
  absl::StatusOr<std::unique_ptr<transport::Endpoint>> ep = (*t)->NewEndpoint();
  if (!ep.ok()) return ep.status();
  // Names this load on every node (jobs check all nodes agree).
  uint64_t load_id = 0;
  while (load_id == 0) {
    const transport::Nonce n = transport::NewNonce();
    std::memcpy(&load_id, n.data(), sizeof(load_id));
  }
  std::vector<uint32_t> staged(nodes.size(), 0);
  auto failed = [&](uint32_t k, const absl::Status& s) {
    return absl::Status(
        s.code(),
        absl::StrFormat("loading memory node %s (position %d): %s; the "
                        "store it had still serves",
                        nodes[k].ToString(), k, s.message()));
  };
  // Refused at once if jobs hold the stores (unless --force).
  for (uint32_t k = 0; k < nodes.size(); ++k) {
    auto [begin, end] = store::NodeSlice(image.superblock(), k);
    absl::StatusOr<transport::RegionInfo> staging =
        (*t)->control().CreateStore(k, end - begin, load_id);
    if (!staging.ok()) return failed(k, staging.status());
    staged[k] = staging->id;
    absl::StatusOr<uint64_t> check = (*t)->control().CommitStore(
        k, force | transport::wire::kCommitCheckOnly);
    if (!check.ok()) return failed(k, check.status());
  }
  constexpr uint64_t kChunk = 4 << 20, kBatch = 16;
  auto write = [&](uint32_t k, uint64_t begin, uint64_t at, uint64_t end) {
    (*ep)->Write(k, staged[k], at - begin, image.bytes().data() + at,
                 static_cast<uint32_t>(std::min(kChunk, end - at)));
  };
  for (uint32_t k = nodes.size(); k-- > 0;) {
    auto [begin, end] = store::NodeSlice(image.superblock(), k);
    for (uint64_t at = begin + (k == 0 ? kChunk : 0); at < end; at += kChunk) {
      write(k, begin, at, end);
      if ((*ep)->queued() >= kBatch) {
        if (absl::Status s = (*ep)->Flush(); !s.ok()) return failed(k, s);
      }
    }
    if (k == 0 && begin < end) write(0, begin, begin, end);  // superblock
    if (absl::Status s = (*ep)->Flush(); !s.ok()) return failed(k, s);
    absl::PrintF("  memory node %d (%s): %d bytes\n", k, nodes[k].ToString(),
                 end - begin);
  }
  // Every node's new store is in place beside its old one: switch them.
  // Until the last switch, a job that starts sees nodes of two loads and
  // is refused by their load ids; never a mix.
  for (uint32_t k = 0; k < nodes.size(); ++k) {
    absl::StatusOr<uint64_t> committed = (*t)->control().CommitStore(k, force);
    if (!committed.ok()) {
      // What the cluster holds now: the first node to refuse leaves every
      // node on the old store; a later one, two loads.
      const std::string state =
          k == 0 ? "no node switched: every node still serves the store it "
                   "had"
                 : absl::StrFormat(
                       "the %d node%s before it switched, so the cluster "
                       "holds two loads (jobs are refused until it is "
                       "loaded again)",
                       k, k == 1 ? "" : "s");
      return absl::Status(
          committed.status().code(),
          absl::StrFormat("switching memory node %s (position %d) to the new "
                          "store: %s; %s: run dmg load again",
                          nodes[k].ToString(), k, committed.status().message(),
                          state));
    }
  }
  return absl::OkStatus();
}

// Before the graph is built (seconds to minutes for a large one): every
// node answers and takes this client's secret as the admin's, so that a
// node that is down or a missing secret fails the load at once.
absl::Status CheckNodesFirst(const std::vector<transport::HostPort>& nodes) {
  absl::StatusOr<transport::TcpOptions> options =
      ClientOptions(transport::Role::kAdmin, "dmg-load");
  if (!options.ok()) return options.status();
  absl::StatusOr<std::unique_ptr<transport::TcpControl>> c =
      transport::TcpControl::Connect(nodes, *options);
  return c.status();
}

}  // namespace

std::vector<std::string> LoadFlagNames() {
  std::vector<std::string> names = GraphFlagNames();
  names.insert(names.end(),
               {"image", "memory_nodes", "force", "transport_timeout_ms",
                "secret_file", "progress"});
  return names;
}

int LoadCommand() {
  absl::StatusOr<store::GraphSourceOptions> options =
      GraphSourceOptionsFromFlags();
  if (!options.ok()) return ReportError(options.status());
  if (FLAGS_image.empty() == FLAGS_memory_nodes.empty()) {
    return ReportError(absl::InvalidArgumentError(
        "dmg load needs exactly one of --image=FILE and "
        "--memory_nodes=HOST:PORT,..."));
  }
  if (!FLAGS_image.empty()) {
    if (absl::Status s = store::CheckOutputPath(FLAGS_image); !s.ok()) {
      return ReportError(s);
    }
  }
  std::vector<transport::HostPort> nodes;
  if (!FLAGS_memory_nodes.empty()) {
    absl::StatusOr<std::vector<transport::HostPort>> parsed =
        transport::ParseHostPorts(FLAGS_memory_nodes);
    if (!parsed.ok()) return ReportError(parsed.status());
    nodes = *parsed;
    if (!gflags::GetCommandLineFlagInfoOrDie("layout_memory_nodes")
             .is_default &&
        FLAGS_layout_memory_nodes != nodes.size()) {
      return ReportError(absl::InvalidArgumentError(absl::StrFormat(
          "--layout_memory_nodes=%d contradicts the %d --memory_nodes given "
          "(a load into memory nodes lays the store out for them; leave the "
          "flag out)",
          FLAGS_layout_memory_nodes, nodes.size())));
    }
    options->layout.num_memory_nodes = nodes.size();
  }
  if (!nodes.empty()) {
    if (absl::Status s = CheckNodesFirst(nodes); !s.ok()) {
      return ReportError(s);
    }
  }
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<store::StoreImage> image = [&] {
    ProgressTicker ticker("building the store of " + FLAGS_graph);
    return store::LoadStore(FLAGS_graph, *options);
  }();
  if (!image.ok()) return ReportError(image.status());
  if (nodes.empty()) {
    if (absl::Status s = CheckLayoutFlags(*image); !s.ok()) {
      return ReportError(s);
    }
  }
  double build = Since(start);
  if (!nodes.empty()) {
    if (image->superblock().num_memory_nodes != nodes.size()) {
      return ReportError(absl::InvalidArgumentError(absl::StrFormat(
          "%s is laid out for %d memory node(s), but %d were given; load "
          "from the source graph to re-stripe it",
          FLAGS_graph, image->superblock().num_memory_nodes, nodes.size())));
    }
    absl::PrintF("loading %s: %d vertices, %d arcs, %d bytes (build %.3f s)\n",
                 FLAGS_graph, image->num_vertices(), image->num_arcs(),
                 image->bytes().size(), build);
    if (absl::Status s = Upload(*image, nodes); !s.ok()) return ReportError(s);
    absl::PrintF("loaded into %d memory node(s) in %.3f s\n", nodes.size(),
                 Since(start) - build);
    return kExitOk;
  }
  if (absl::Status s = store::WriteImageFile(*image, FLAGS_image); !s.ok()) {
    return ReportError(s);
  }
  absl::PrintF(
      "wrote %s: %d vertices, %d arcs, %d bytes (build %.3f s, write %.3f "
      "s)\n",
      FLAGS_image, image->num_vertices(), image->num_arcs(),
      image->bytes().size(), build, Since(start) - build);
  return kExitOk;
}

}  // namespace dmg::cli
