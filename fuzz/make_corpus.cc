// Writes the seed corpora of the fuzz targets into DIR/<target>/ (run by
// fuzz/make_corpus.sh, whose output is checked in): small text files of
// every graph format, valid store images (plain, compressed, weighted, with
// split pieces), raw blocks cut from them, frame sequences a memory node
// answers, and posts compute nodes exchange. Usage: make_corpus DIR
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "compute_node/wire_codec.h"
#include "coordinator/outbox.h"
#include "memory_node/snapshot.h"
#include "store/build_graph.h"
#include "store/layout.h"
#include "transport/transport.h"
#include "transport/wire.h"

namespace {

namespace fs = std::filesystem;
namespace store = dmg::store;
namespace wire = dmg::transport::wire;

fs::path out_dir;

void Write(const std::string& target, const std::string& name,
           const std::string& bytes) {
  const fs::path dir = out_dir / target;
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

std::string Bytes(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

void TextSeeds() {
  const std::string el = "# a SNAP edge list\n0 1\n1 2\n2 0\n2 3\n3 3\n0 1\n";
  Write("read_edge_list", "snap.el", el);
  Write("read_edge_list", "tabs.el", "# Nodes: 4 Edges: 3\n0\t1\n1\t2\n3\t0\n");
  Write("read_edge_list", "csv.el", "0,1\n1,2\r\n% comment\n5 4\n");
  Write("read_weighted_edge_list", "w.wel", "0 1 5\n1 2 -3\n2 0 7\n2 3 1\n");
  Write("read_weighted_edge_list", "big.wel", "0 9 2147483647\n9 0 0\n");
  Write("read_matrix_market", "general.mtx",
        "%%MatrixMarket matrix coordinate pattern general\n% c\n4 4 4\n"
        "1 2\n2 3\n3 1\n4 4\n");
  Write("read_matrix_market", "symmetric.mtx",
        "%%MatrixMarket matrix coordinate integer symmetric\n3 3 3\n"
        "2 1 4\n3 1 -2\n3 2 9\n");
  Write("read_matrix_market", "real.mtx",
        "%%MatrixMarket matrix coordinate real general\n3 3 2\n"
        "1 3 0.5\n2 1 1e3\n");
  Write("read_dimacs", "sp.gr",
        "c DIMACS-9 shortest paths\np sp 4 5\na 1 2 3\na 2 3 1\na 3 4 2\n"
        "a 4 1 8\na 1 3 9\n");
  Write("read_pace", "tw.gr",
        "c PACE treewidth\np tw 5 4\n1 2\n2 3\n3 4\n"
        "4 5\n");
  Write("read_any", "plain", el);
  Write("read_any", "mtx",
        "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n");
  Write("read_any", "gr", "p sp 3 2\na 1 2 1\na 2 3 1\n");
}

store::Graph MakeGraph(bool weighted, bool hub) {
  store::EdgeList edges;
  const int n = hub ? 80 : 24;
  for (int v = 0; v < n; ++v) {
    for (int k = 1; k <= 3; ++k) {
      const store::VertexId t = (v * 7 + k * 5) % n;
      if (weighted) {
        edges.Add(v, t, (v * 31 + k) % 100 - 10);
      } else {
        edges.Add(v, t);
      }
    }
    if (hub) edges.Add(0, v);  // a vertex too large for one 256-byte block
  }
  edges.num_vertices = n;
  absl::StatusOr<store::Graph> g = store::BuildGraph(edges, {}, 1);
  if (!g.ok()) std::abort();
  return *std::move(g);
}

void ImageAndBlockSeeds() {
  struct Variant {
    const char* name;
    bool weighted, hub, compress;
  };
  for (const Variant& v : {Variant{"plain", false, false, false},
                           Variant{"compressed", false, false, true},
                           Variant{"weighted", true, false, false},
                           Variant{"weighted_compressed", true, false, true},
                           Variant{"split", false, true, false},
                           Variant{"split_compressed", false, true, true}}) {
    store::LayoutOptions layout;
    layout.block_size = store::kMinBlockSize;
    layout.threads = 1;
    layout.compress = v.compress;
    absl::StatusOr<store::StoreImage> image =
        store::BuildStoreImage(MakeGraph(v.weighted, v.hub), layout);
    if (!image.ok()) std::abort();
    // Three images (each ~17 KB: five 4 KiB-aligned regions, mostly zeros).
    if (v.name == std::string("plain") ||
        v.name == std::string("weighted_compressed") ||
        v.name == std::string("split_compressed")) {
      Write("image", std::string(v.name) + ".img", Bytes(image->bytes()));
    }
    for (store::Direction d : {store::Direction::kOut, store::Direction::kIn}) {
      const store::RegionEntry* blocks =
          image->FindRegion(store::BlocksKind(d), 0);
      if (blocks == nullptr) std::abort();
      const auto region = image->RegionBytes(*blocks);
      const auto dir = image->directory(d);
      for (size_t i = 0; i < dir.size() && i < 2; ++i) {
        Write("block",
              std::string(v.name) +
                  (d == store::Direction::kOut ? "_out" : "_in") +
                  std::to_string(i),
              Bytes(region.subspan(dir[i].offset, dir[i].length)));
      }
    }
  }
}

std::string Frame(uint16_t type, const std::string& payload, uint32_t id) {
  const wire::FrameHeader h{wire::kMagic, type, 0,
                            static_cast<uint32_t>(payload.size()), id};
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + payload;
}

template <typename... T>
std::string Pack(const T&... values) {
  std::string out;
  wire::Writer w(&out);
  (w.Put(values), ...);
  return out;
}

std::string Op(dmg::transport::OpKind kind, uint32_t region, uint64_t offset,
               uint32_t length, uint64_t compare = 0, uint64_t operand = 0) {
  wire::WireOp op{};
  op.kind = static_cast<uint8_t>(kind);
  op.region = region;
  op.offset = offset;
  op.length = length;
  op.compare = compare;
  op.operand = operand;
  return Pack(op);
}

void FrameSeeds() {
  using dmg::transport::OpKind;
  const std::string hello =
      Frame(wire::kHello, Pack(wire::kProtocolVersion), 1);
  Write("memory_node", "hello", hello);
  Write("memory_node", "hello_list", hello + Frame(wire::kListRegions, "", 2));
  std::string alloc;
  wire::Writer(&alloc).Put(uint64_t{4096});
  wire::Writer(&alloc).PutString("state");
  const std::string batch = Pack(uint32_t{4}) + Op(OpKind::kRead, 1, 0, 64) +
                            Op(OpKind::kWrite, 1, 64, 8) +
                            Op(OpKind::kCompareAndSwap, 1, 128, 8, 0, 7) +
                            Op(OpKind::kFetchAndAdd, 1, 136, 8, 0, 1) +
                            std::string("ABCDEFGH");
  Write("memory_node", "batch", hello + Frame(wire::kBatch, batch, 3));
  Write("memory_node", "allocate_batch_free",
        hello + Frame(wire::kAllocate, alloc, 2) +
            Frame(wire::kBatch,
                  Pack(uint32_t{1}) + Op(OpKind::kRead, 2, 4000, 96), 3) +
            Frame(wire::kFree, Pack(uint32_t{2}), 4));
  Write("memory_node", "create_store",
        Frame(wire::kCreateStore, Pack(uint64_t{8192}, uint32_t{0}), 1) +
            Frame(wire::kBatch,
                  Pack(uint32_t{1}) + Op(OpKind::kWrite, 0, 0, 4) + "DMGS", 2) +
            Frame(wire::kListRegions, "", 3));
  Write("memory_node", "unknown_type", Frame(99, "xyz", 1) + hello);
  Write("memory_node", "shutdown", hello + Frame(wire::kShutdown, "", 9));
}

void WireCodecSeeds() {
  namespace cw = dmg::compute::wire;
  auto head = [](uint8_t type, uint32_t n) {
    std::string s(1, static_cast<char>(type));
    s.append(reinterpret_cast<const char*>(&n), 4);
    return s;
  };
  std::vector<uint64_t> sparse(16), dense(2, ~uint64_t{0});
  sparse[3] = 0x11;
  sparse[9] = uint64_t{1} << 63;
  std::string sparse_set, dense_set, empty_set;
  cw::PutVertexSet(sparse_set, sparse);
  cw::PutVertexSet(dense_set, dense);
  cw::PutVertexSet(empty_set, std::vector<uint64_t>(4));
  using dmg::coordinator::RemoteUpdate;
  std::string i64, u32, f32, f64;
  cw::PutUpdates<RemoteUpdate<int64_t>>(
      i64, std::vector<RemoteUpdate<int64_t>>{{1, -5}, {7, 1 << 20}, {900, 3}});
  cw::PutUpdates<RemoteUpdate<uint32_t>>(
      u32, std::vector<RemoteUpdate<uint32_t>>{{0, 4}, {3, 0xffffffff}});
  cw::PutUpdates<RemoteUpdate<float>>(
      f32, std::vector<RemoteUpdate<float>>{{2, 0.25f}, {5, -1.5f}});
  cw::PutUpdates<RemoteUpdate<double>>(
      f64, std::vector<RemoteUpdate<double>>{{10, 1e-9}});
  Write("wire_codec", "sparse_i64", head(0, 1024) + sparse_set + i64);
  Write("wire_codec", "dense_u32", head(1, 128) + dense_set + u32);
  Write("wire_codec", "empty_i32", head(2, 64) + empty_set + u32);
  Write("wire_codec", "sparse_f32", head(3, 1024) + sparse_set + f32);
  Write("wire_codec", "dense_f64", head(4, 200) + dense_set + f64);
  std::string array = head(5, 1) + empty_set;
  const uint64_t three = 3;
  array.append(reinterpret_cast<const char*>(&three), 8);
  array.append(24, 'x');
  Write("wire_codec", "array", array);
}

}  // namespace

// Snapshot files as a memory node writes them (--snapshot_dir).
void SnapshotSeeds() {
  const std::string dir = (out_dir / "snapshot.tmpdir").string();
  {
    auto d = dmg::memory_node::SnapshotDir::Open(dir);
    if (!d.ok()) return;
    std::string store = "a small store: 0123456789abcdef";
    // Job state: two regions of one job, as `dmg snapshot --jobs` writes.
    auto bytes = [](const std::string& text) {
      auto b = std::make_shared<dmg::AlignedBuffer>(text.size());
      std::memcpy(b->data(), text.data(), text.size());
      return std::shared_ptr<const dmg::AlignedBuffer>(std::move(b));
    };
    // With its job token's verifier (snapshot version 3), and one without.
    dmg::transport::Digest verifier;
    for (size_t i = 0; i < verifier.size(); ++i) verifier[i] = uint8_t(i);
    const std::vector<dmg::memory_node::JobRegionRef> jobs = {
        {"pr-1", "progress", bytes("DMGPROG1 a progress record"), verifier},
        {"pr-1", "state.rank.0", bytes("0123456789abcdef01234567"), verifier},
        {"bfs-2", "progress", bytes("DMGPROG1"), std::nullopt}};
    for (const std::string& name : {"jobs", "small", "empty"}) {
      if (name == "empty") store.clear();
      auto seq = (*d)->Write(
          1, 42,
          std::span(reinterpret_cast<const std::byte*>(store.data()),
                    store.size()),
          name == "jobs" ? std::span(jobs)
                         : std::span<const dmg::memory_node::JobRegionRef>(),
          nullptr);
      if (!seq.ok()) continue;
      const std::vector<std::string> files = (*d)->List();
      if (files.empty()) continue;
      std::ifstream f(files.back(), std::ios::binary);
      Write("snapshot", name,
            std::string((std::istreambuf_iterator<char>(f)), {}));
    }
  }
  std::filesystem::remove_all(dir);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus DIR\n");
    return 2;
  }
  out_dir = argv[1];
  TextSeeds();
  ImageAndBlockSeeds();
  FrameSeeds();
  WireCodecSeeds();
  SnapshotSeeds();
  return 0;
}
