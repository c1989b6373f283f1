// Validated bytes (issue 13, item 4): a forged target id, offset, length or
// header in a store image is caught before any algorithm sees it.
//
// Four small images (directed, weighted, compressed, symmetric) get 100
// seeded corruptions in all, each followed by recomputed region and
// superblock checksums, so that only the checks of the bytes' meaning can
// catch them:
//  - at load (StoreImage::FromBuffer, kFull, what `dmg load --image` and a
//    `--graph=X.img` run do), every one must be refused with one line
//    naming the image (and the block or vertex);
//  - on fetch, those a compute node can tell from the bytes it READs alone
//    (targets >= n, offsets that decrease, headers, lengths and directory
//    entries that disagree) are also served unvalidated by memory nodes
//    (kTrusted, as a forged WRITE after load would leave them), and BFS,
//    PageRank (and SSSP on the weighted image) run on them with a bounded
//    cache (graph-aware and page_lru) and with the whole graph cached.
//    Each run must fail with an error or give the uncorrupted graph's
//    answer (it never read the damaged bytes); each corruption runs in a
//    child process, so that a crash is counted, not fatal.
// In-range ids and offsets that still make a well-formed block (the graph
// is then another valid one, but its in-blocks are no longer the
// transpose of its out-blocks) are for the load-time check only.
// A last test forges a WRITE into a memory node's store after load: the
// next job fails with a clear error.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "algorithms/algorithms.h"
#include "gtest/gtest.h"
#include "reference/compare.h"
#include "reference/reference.h"
#include "store/block_codec.h"
#include "store/build_graph.h"
#include "store/generator.h"
#include "store/layout.h"
#include "store/store_image.h"
#include "tools/embedded_cluster.h"
#include "transport/transport.h"

namespace dmg {
namespace {

using store::BlockHeader;
using store::Direction;
using store::DirectoryEntry;
using store::RegionEntry;
using store::StoreImage;
using store::Superblock;
using store::VertexId;

constexpr uint32_t kBlockSize = 1024;

// A generated graph, directed (each generated edge one arc: in-blocks are
// not out-blocks) unless `symmetrize`.
store::Graph MakeGraph(store::GeneratorParams::Kind kind, int scale,
                       bool weighted, bool symmetrize) {
  store::EdgeList e = store::Generate({kind, scale, 8, 7});
  e.undirected = false;
  if (weighted) {
    for (size_t i = 0; i < e.num_arcs(); ++i) {
      e.weights.push_back(
          static_cast<store::Weight>((i * 2654435761u) % 100 + 1));
    }
  }
  store::CleanOptions clean;
  clean.symmetrize = symmetrize;
  absl::StatusOr<store::Graph> g = store::BuildGraph(std::move(e), clean);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

AlignedBuffer Copy(std::span<const std::byte> bytes) {
  AlignedBuffer b(bytes.size(), AlignedBuffer::Init::kUninitialized);
  std::memcpy(b.data(), bytes.data(), bytes.size());
  return b;
}

// Recomputes every region's CRC and then the superblock's, as a forger
// who knows the format would: the checksum checks pass.
void Reseal(AlignedBuffer& image) {
  auto* sb = reinterpret_cast<Superblock*>(image.data());
  for (uint32_t i = 0; i < sb->num_regions; ++i) {
    RegionEntry& r = sb->regions[i];
    r.crc32 = store::Crc32({image.data() + r.offset, r.length});
  }
  sb->crc32 = store::Crc32({image.data(), store::kSuperblockSize - 4});
}

struct Answers {
  std::vector<int32_t> bfs;
  std::vector<double> pr;
  std::vector<int64_t> sssp;
};

constexpr int kPageRankIterations = 8;

// One image under test: the graph, its uncorrupted image, the answers.
struct Subject {
  std::string name;
  store::Graph graph;
  AlignedBuffer image;
  VertexId source = 0;
  Answers answers;
  uint64_t bounded_cache = 0;  // a cache that holds part of the store
};

Subject MakeSubject(std::string name, store::Graph graph, bool compress) {
  Subject s;
  s.name = std::move(name);
  s.graph = std::move(graph);
  store::LayoutOptions layout;
  layout.block_size = kBlockSize;
  layout.compress = compress;
  absl::StatusOr<StoreImage> image = store::BuildStoreImage(s.graph, layout);
  EXPECT_TRUE(image.ok()) << image.status();
  s.image = Copy(image->bytes());
  while (s.source + 1 < s.graph.num_vertices() &&
         s.graph.out.degree(s.source) == 0) {
    ++s.source;
  }
  s.answers.bfs = *reference::Bfs(s.graph, s.source);
  s.answers.pr = reference::PageRank(s.graph, kPageRankIterations, 0)->scores;
  if (s.graph.weighted()) {
    s.answers.sssp = *reference::Sssp(s.graph, s.source, false);
  }
  // An eighth of the store, or the job's minimum (two workers' buffers and
  // pages) and some room.
  s.bounded_cache = std::max<uint64_t>(s.image.size() / 8, 200 << 10);
  return s;
}

// The blocks region of direction d (one memory node) and entry i's bytes.
struct BlockAt {
  std::byte* bytes;
  uint64_t image_offset;
  const DirectoryEntry* entry;
};

std::span<const DirectoryEntry> Directory(const AlignedBuffer& image,
                                          Direction d) {
  const auto* sb = reinterpret_cast<const Superblock*>(image.data());
  for (uint32_t i = 0; i < sb->num_regions; ++i) {
    const RegionEntry& r = sb->regions[i];
    if (r.kind == static_cast<uint32_t>(store::DirectoryKind(d))) {
      return {reinterpret_cast<const DirectoryEntry*>(image.data() + r.offset),
              r.length / sizeof(DirectoryEntry)};
    }
  }
  return {};
}

BlockAt Block(AlignedBuffer& image, Direction d, size_t i) {
  const auto* sb = reinterpret_cast<const Superblock*>(image.data());
  const DirectoryEntry& e = Directory(image, d)[i];
  for (uint32_t k = 0; k < sb->num_regions; ++k) {
    const RegionEntry& r = sb->regions[k];
    if (r.kind == static_cast<uint32_t>(store::BlocksKind(d)) &&
        r.memory_node == e.memory_node) {
      return {image.data() + r.offset + e.offset, r.offset + e.offset, &e};
    }
  }
  ADD_FAILURE() << "no blocks region";
  return {};
}

// What a corruption changes, and whether a compute node that READs the
// changed bytes can tell (else only the load-time check can).
enum class Kind {
  kTargetOutOfRange,  // a target id >= n (plain: the id; packed: its base)
  kTargetInRange,     // another valid id: breaks the transpose
  kOffsetDecreases,   // an offset above the next one
  kOffsetMoves,       // an offset moved between its neighbours
  kHeaderField,       // a bit of a block header's field
  kDirectoryField,    // a directory entry's offset, length, first edge
  kSuperblockField,   // symmetric flag, weight range, arc count
};
const char* KindName(Kind k) {
  switch (k) {
    case Kind::kTargetOutOfRange:
      return "target >= n";
    case Kind::kTargetInRange:
      return "target in range";
    case Kind::kOffsetDecreases:
      return "offset decreases";
    case Kind::kOffsetMoves:
      return "offset moved";
    case Kind::kHeaderField:
      return "block header";
    case Kind::kDirectoryField:
      return "directory entry";
    case Kind::kSuperblockField:
      return "superblock";
  }
  return "?";
}
bool FetchDetectable(Kind k) {
  return k != Kind::kTargetInRange && k != Kind::kOffsetMoves &&
         k != Kind::kSuperblockField;
}

// A compressed block's vertex j segment: where its first-target varint
// lies (as [begin, end) offsets in the block), or false if it is empty.
bool FirstVarint(const std::byte* block, uint32_t j, uint64_t* begin,
                 uint64_t* end) {
  BlockHeader h;
  std::memcpy(&h, block, sizeof(h));
  const bool narrow = h.flags & store::kBlockFlagNarrowOffsets;
  auto byte_offset = [&](uint32_t i) -> uint64_t {
    const std::byte* at = block + store::ByteOffsetsAt(h.vertex_count);
    if (narrow) {
      uint16_t v;
      std::memcpy(&v, at + 2 * i, 2);
      return v;
    }
    uint32_t v;
    std::memcpy(&v, at + 4 * i, 4);
    return v;
  };
  const uint64_t stream = store::StreamAt(h.vertex_count, narrow);
  uint64_t p = stream + byte_offset(j);
  if (p == stream + byte_offset(j + 1)) return false;
  auto* u = reinterpret_cast<const uint8_t*>(block);
  while (u[p] & 0x80) ++p;  // the edge count
  *begin = ++p;
  while (u[p] & 0x80) ++p;
  *end = p + 1;
  return true;
}

// Writes zigzag value z as a varint of exactly end - begin bytes.
void PutVarint(std::byte* block, uint64_t begin, uint64_t end, uint64_t z) {
  auto* u = reinterpret_cast<uint8_t*>(block);
  for (uint64_t p = begin; p < end; ++p, z >>= 7) {
    u[p] = static_cast<uint8_t>((z & 0x7f) | (p + 1 < end ? 0x80 : 0));
  }
}

struct Corruption {
  Kind kind;
  std::string what;  // where, for messages
};

// Applies one seeded corruption of `kind` to `image` (not resealed).
// Returns false if this image has nothing to corrupt that way (the caller
// draws again).
bool Corrupt(Kind kind, std::mt19937_64& rng, const Subject& s,
             AlignedBuffer& image, Corruption* c) {
  auto* sb = reinterpret_cast<Superblock*>(image.data());
  const uint64_t n = sb->num_vertices;
  const bool packed = sb->flags & store::kSuperblockFlagCompressed;
  const bool weighted = sb->flags & store::kSuperblockFlagWeighted;
  const Direction d = rng() % 2 ? Direction::kOut : Direction::kIn;
  std::span<const DirectoryEntry> dir = Directory(image, d);
  const size_t i = rng() % dir.size();
  BlockAt b = Block(image, d, i);
  BlockHeader h;
  std::memcpy(&h, b.bytes, sizeof(h));
  auto* offsets = reinterpret_cast<uint32_t*>(b.bytes + sizeof(BlockHeader));
  auto* targets = reinterpret_cast<VertexId*>(
      b.bytes + sizeof(BlockHeader) + 4 * (uint64_t{h.vertex_count} + 1));
  c->kind = kind;
  c->what = absl::StrCat(d == Direction::kOut ? "out" : "in", "-block ", i);
  switch (kind) {
    case Kind::kTargetOutOfRange:
    case Kind::kTargetInRange: {
      if (h.edge_count == 0) return false;
      const bool out_of_range = kind == Kind::kTargetOutOfRange;
      if (!packed) {
        const uint32_t k = rng() % h.edge_count;
        const VertexId old = targets[k];
        targets[k] =
            out_of_range
                ? static_cast<VertexId>(n + rng() % (0xFFFFFFFFull - n + 1))
                : static_cast<VertexId>((old + 1 + rng() % (n - 1)) % n);
        absl::StrAppend(&c->what, " edge ", k, ": ", old, " -> ", targets[k]);
        return true;
      }
      // A packed vertex's first target, a varint relative to the vertex:
      // moved (all its targets with it), keeping the varint's length.
      const uint32_t j = rng() % h.vertex_count;
      uint64_t begin, end;
      if (!FirstVarint(b.bytes, j, &begin, &end)) return false;
      const VertexId v = h.first_vertex + j;
      const uint32_t lo = offsets[j], hi = offsets[j + 1];
      store::DecodeBuffer buf;
      absl::StatusOr<store::BlockView> view =
          store::ParseAnyBlock({b.bytes, h.length}, buf, n);
      if (!view.ok()) return false;
      const int64_t t0 = view->all_targets()[lo];
      const int64_t span = view->all_targets()[hi - 1] - t0;
      const uint64_t bits = 7 * (end - begin);
      // Values of the same length: [2^(7(L-1)), 2^(7L)) (or from 0).
      const uint64_t zmin = bits == 7 ? 0 : uint64_t{1} << (bits - 7);
      const uint64_t zmax = (uint64_t{1} << bits) - 1;
      for (int tries = 0; tries < 64; ++tries) {
        const uint64_t z = out_of_range ? (zmax & ~uint64_t{1})  // largest +
                                        : zmin + rng() % (zmax - zmin + 1);
        const int64_t x =
            static_cast<int64_t>(z >> 1) ^ -static_cast<int64_t>(z & 1);
        const int64_t t = int64_t{v} + x;
        const bool in = t >= 0 && t + span < static_cast<int64_t>(n);
        if (t == t0 || in == out_of_range || t < 0) continue;
        PutVarint(b.bytes, begin, end, z);
        absl::StrAppend(&c->what, " vertex ", v, " first target ", t0, " -> ",
                        t);
        return true;
      }
      return false;
    }
    case Kind::kOffsetDecreases:
    case Kind::kOffsetMoves: {
      if (h.vertex_count < 2) return false;
      const uint32_t j = 1 + rng() % (h.vertex_count - 1);
      const uint32_t old = offsets[j];
      if (kind == Kind::kOffsetDecreases) {
        offsets[j] = offsets[j + 1] + 1 + rng() % 8;
      } else {
        if (packed || offsets[j + 1] - offsets[j - 1] < 1) return false;
        do {
          offsets[j] =
              offsets[j - 1] + rng() % (offsets[j + 1] - offsets[j - 1] + 1);
        } while (offsets[j] == old);
      }
      absl::StrAppend(&c->what, " offset ", j, ": ", old, " -> ", offsets[j]);
      return true;
    }
    case Kind::kHeaderField: {
      static constexpr size_t kFields[] = {offsetof(BlockHeader, magic),
                                           offsetof(BlockHeader, first_vertex),
                                           offsetof(BlockHeader, vertex_count),
                                           offsetof(BlockHeader, edge_count),
                                           offsetof(BlockHeader, length),
                                           offsetof(BlockHeader, first_edge)};
      const size_t field = kFields[rng() % std::size(kFields)];
      const int bit = rng() % 16;  // low bits: the values stay plausible
      b.bytes[field + bit / 8] ^=
          std::byte{static_cast<uint8_t>(1u << (bit % 8))};
      absl::StrAppend(&c->what, " header byte ", field, " bit ", bit);
      return true;
    }
    case Kind::kDirectoryField: {
      auto& e = const_cast<DirectoryEntry&>(dir[i]);
      switch (rng() % 4) {
        case 0:
          e.offset += 8 * (1 + rng() % 4);
          absl::StrAppend(&c->what, " directory offset +");
          break;
        case 1:
          if (e.offset < 8) return false;
          e.offset -= 8;
          absl::StrAppend(&c->what, " directory offset -8");
          break;
        case 2:
          e.length += rng() % 2 ? 8 : -8;
          absl::StrAppend(&c->what, " directory length");
          break;
        default:
          if (i == 0) return false;
          e.first_edge += rng() % 2 ? 1 : -1;
          absl::StrAppend(&c->what, " directory first_edge");
          break;
      }
      return true;
    }
    case Kind::kSuperblockField: {
      switch (rng() % 3) {
        case 0:
          if (sb->flags & store::kSuperblockFlagSymmetric) return false;
          sb->flags |= store::kSuperblockFlagSymmetric;
          c->what = "superblock: symmetric flag on a directed graph";
          break;
        case 1:
          if (!weighted) return false;
          sb->min_weight = rng() % 2 ? -1 : sb->min_weight + 1;
          c->what = "superblock: min_weight";
          break;
        default:
          sb->num_arcs += rng() % 2 ? 1 : -1;
          c->what = "superblock: num_arcs";
          break;
      }
      return true;
    }
  }
  return false;
}

// What the runs over one corrupted image gave.
struct Outcome {
  int runs = 0;
  int detected = 0;    // an error status
  int unaffected = 0;  // OK and the uncorrupted answer
  int wrong = 0;       // OK and another answer
  char first_error[200] = {};
  char first_wrong[200] = {};
};

struct CacheCase {
  const char* name;
  bool bounded;
  compute::CachePolicy policy;
};
constexpr CacheCase kCaches[] = {
    {"bounded graph-aware", true, compute::CachePolicy::kGraphAware},
    {"bounded page_lru", true, compute::CachePolicy::kPageLru},
    {"whole graph cached", false, compute::CachePolicy::kGraphAware},
};

// BFS, PageRank (and SSSP if weighted) on `image` served unvalidated, in
// every cache configuration.
Outcome RunAlgorithms(const Subject& s, const AlignedBuffer& image) {
  Outcome o;
  auto note = [&](const absl::Status& status, bool same) {
    ++o.runs;
    if (!status.ok()) {
      ++o.detected;
      if (o.first_error[0] == 0) {
        std::snprintf(o.first_error, sizeof(o.first_error), "%s",
                      std::string(status.message()).c_str());
      }
    } else if (same) {
      ++o.unaffected;
    } else {
      ++o.wrong;
    }
  };
  for (const CacheCase& cache : kCaches) {
    compute::EngineOptions eo;
    eo.threads = 2;
    eo.batch_bytes = 8 * 1024;
    eo.cache_bytes =
        cache.bounded ? s.bounded_cache : compute::MemoryBudget::kUnlimited;
    eo.cache_policy = cache.policy;
    for (int algo = 0; algo < (s.graph.weighted() ? 3 : 2); ++algo) {
      absl::StatusOr<StoreImage> img = StoreImage::FromBuffer(
          Copy(image.span()), "forged", StoreImage::Validation::kTrusted);
      if (!img.ok()) {
        note(img.status(), false);
        continue;
      }
      auto c = cli::EmbeddedCluster::Start(*std::move(img), eo);
      if (!c.ok()) {
        note(c.status(), false);
        continue;
      }
      compute::Engine& engine = (*c)->engine();
      if (algo == 0) {
        auto r = algorithms::Bfs(engine, s.source);
        note(r.status(), r.ok() && *r == s.answers.bfs);
      } else if (algo == 1) {
        auto r = algorithms::PageRank(engine, kPageRankIterations, 0);
        note(r.status(),
             r.ok() && reference::L1Distance(s.answers.pr, r->scores) <= 1e-9);
      } else {
        auto r = algorithms::Sssp(engine, s.source, false);
        note(r.status(), r.ok() && *r == s.answers.sssp);
      }
      if (o.wrong > 0 && o.first_wrong[0] == 0) {
        std::snprintf(o.first_wrong, sizeof(o.first_wrong), "%s, algorithm %d",
                      cache.name, algo);
      }
    }
  }
  return o;
}

// Runs fn in a child process; false (and *signal set) if it crashed.
bool RunIsolated(const std::function<Outcome()>& fn, Outcome* out,
                 int* signal) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Outcome o = fn();
    const ssize_t written = write(fds[1], &o, sizeof(o));
    _exit(written == static_cast<ssize_t>(sizeof(o)) ? 0 : 3);
  }
  close(fds[1]);
  ssize_t got = 0;
  while (got < static_cast<ssize_t>(sizeof(*out))) {
    const ssize_t r =
        read(fds[0], reinterpret_cast<char*>(out) + got, sizeof(*out) - got);
    if (r <= 0) break;
    got += r;
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  *signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
         got == static_cast<ssize_t>(sizeof(*out));
}

TEST(BlockValidationTest, HundredCorruptionsAreCaughtBeforeAnyAlgorithm) {
  using Gen = store::GeneratorParams::Kind;
  std::vector<Subject> subjects;
  subjects.push_back(
      MakeSubject("kron:14", MakeGraph(Gen::kKron, 14, false, false), false));
  subjects.push_back(MakeSubject(
      "urand:14 weighted", MakeGraph(Gen::kUrand, 14, true, false), false));
  subjects.push_back(MakeSubject(
      "kron:14 compressed", MakeGraph(Gen::kKron, 14, false, false), true));
  subjects.push_back(MakeSubject(
      "urand:13 symmetric", MakeGraph(Gen::kUrand, 13, false, true), false));
  // Each subject, uncorrupted: validates at load, and every run gives the
  // reference's answers (the bounded cache really is smaller than the
  // store).
  for (Subject& s : subjects) {
    SCOPED_TRACE(s.name);
    const bool symmetric =
        reinterpret_cast<const Superblock*>(s.image.data())->flags &
        store::kSuperblockFlagSymmetric;
    ASSERT_EQ(symmetric, s.name.find("symmetric") != std::string::npos);
    ASSERT_TRUE(StoreImage::FromBuffer(Copy(s.image.span()), "clean").ok());
    ASSERT_LT(s.bounded_cache, s.image.size() / 2);
    Outcome o = RunAlgorithms(s, s.image);
    ASSERT_EQ(o.unaffected, o.runs) << o.first_error;
  }
  const int kCorruptions[] = {30, 30, 25, 15};  // per subject: 100
  const Kind kKinds[] = {Kind::kTargetOutOfRange, Kind::kTargetOutOfRange,
                         Kind::kTargetOutOfRange, Kind::kTargetInRange,
                         Kind::kTargetInRange,    Kind::kOffsetDecreases,
                         Kind::kOffsetMoves,      Kind::kHeaderField,
                         Kind::kDirectoryField,   Kind::kSuperblockField};
  std::mt19937_64 rng(20261130);
  int corruptions = 0, detected_at_load = 0, fetch_cases = 0, runs = 0,
      runs_detected = 0, runs_unaffected = 0, wrong = 0, crashes = 0;
  std::map<std::string, int> by_kind;
  for (size_t k = 0; k < subjects.size(); ++k) {
    const Subject& s = subjects[k];
    for (int m = 0; m < kCorruptions[k]; ++m) {
      AlignedBuffer image = Copy(s.image.span());
      Corruption c;
      Kind kind;
      do {
        kind = kKinds[rng() % std::size(kKinds)];
        std::memcpy(image.data(), s.image.data(), s.image.size());
      } while (!Corrupt(kind, rng, s, image, &c));
      Reseal(image);
      ++corruptions;
      ++by_kind[KindName(kind)];
      SCOPED_TRACE(absl::StrCat(s.name, ", corruption ", m, ": ", c.what));
      // At load: refused, one line naming the image.
      absl::StatusOr<StoreImage> loaded =
          StoreImage::FromBuffer(Copy(image.span()), "forged.img");
      if (!loaded.ok()) {
        ++detected_at_load;
        const std::string msg(loaded.status().message());
        EXPECT_EQ(msg.rfind("forged.img: ", 0), 0u) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
        if (kind != Kind::kSuperblockField) {
          EXPECT_TRUE(msg.find("block") != std::string::npos ||
                      msg.find("vertex") != std::string::npos)
              << msg;
        }
      } else {
        ADD_FAILURE() << "not detected at load";
      }
      if (m < 3)
        std::printf("  %s: %s\n    -> %s\n", s.name.c_str(), c.what.c_str(),
                    std::string(loaded.status().message()).c_str());
      if (!FetchDetectable(kind)) continue;
      // On fetch: served as is, never a wrong answer or a crash.
      ++fetch_cases;
      Outcome o;
      int signal = 0;
      if (!RunIsolated([&] { return RunAlgorithms(s, image); }, &o, &signal)) {
        ++crashes;
        ADD_FAILURE() << "the runs crashed (signal " << signal << ")";
        continue;
      }
      runs += o.runs;
      runs_detected += o.detected;
      runs_unaffected += o.unaffected;
      wrong += o.wrong;
      EXPECT_EQ(o.wrong, 0) << "wrong answer with OK status: " << o.first_wrong;
      EXPECT_EQ(o.detected + o.unaffected, o.runs);
      if (o.detected > 0) {
        const std::string msg = o.first_error;
        EXPECT_TRUE(msg.find("block") != std::string::npos ||
                    msg.find("director") != std::string::npos)
            << msg;
      }
    }
  }
  std::printf("%d corruptions (", corruptions);
  for (const auto& [kind, count] : by_kind) {
    std::printf("%s %d, ", kind.c_str(), count);
  }
  std::printf(
      "): %d detected at load.\n%d served unvalidated: %d runs, %d failed "
      "with an error, %d gave the right answer (never read the damage), %d "
      "wrong answers, %d crashes\n",
      detected_at_load, fetch_cases, runs, runs_detected, runs_unaffected,
      wrong, crashes);
  EXPECT_EQ(corruptions, 100);
  EXPECT_EQ(detected_at_load, corruptions);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(crashes, 0);
  // Most fetch-time runs read the damage: the checks, not luck.
  EXPECT_GT(runs_detected, runs / 2);
}

// A forged WRITE into a memory node's store after load (no checksum is
// checked on fetch): the next job fails with an error naming the block,
// for a plain and a compressed image, a push (BFS from the vertex whose
// edge it is) and a pull (PageRank gathers every in-block).
TEST(BlockValidationTest, ForgedWriteIntoAMemoryNodeFailsTheNextJob) {
  using Gen = store::GeneratorParams::Kind;
  for (bool compress : {false, true}) {
    for (Direction d : {Direction::kOut, Direction::kIn}) {
      for (bool bounded : {true, false}) {
        SCOPED_TRACE(absl::StrCat(compress ? "compressed" : "plain",
                                  d == Direction::kOut ? ", out" : ", in",
                                  bounded ? ", bounded cache" : ", unbounded"));
        Subject s = MakeSubject(
            "kron:13", MakeGraph(Gen::kKron, 13, false, false), compress);
        compute::EngineOptions eo;
        eo.threads = 2;
        eo.batch_bytes = 8 * 1024;
        eo.cache_bytes =
            bounded ? s.bounded_cache : compute::MemoryBudget::kUnlimited;
        absl::StatusOr<StoreImage> img =
            StoreImage::FromBuffer(Copy(s.image.span()), "image");
        ASSERT_TRUE(img.ok()) << img.status();
        auto c = cli::EmbeddedCluster::Start(*std::move(img), eo);
        ASSERT_TRUE(c.ok()) << c.status();
        auto bfs = algorithms::Bfs((*c)->engine(), s.source);
        ASSERT_TRUE(bfs.ok()) << bfs.status();
        EXPECT_EQ(*bfs, s.answers.bfs);
        // An edge of a vertex with edges: out, BFS from it (its first push
        // READs them); in, PageRank (it reads every in-block).
        AlignedBuffer& image = s.image;
        std::span<const DirectoryEntry> dir = Directory(image, d);
        const uint64_t n = s.graph.num_vertices();
        size_t i = d == Direction::kOut ? store::FindBlocks(dir, s.source).first
                                        : dir.size() / 2;
        VertexId victim = 0;
        uint64_t at = 0;
        std::vector<std::byte> forged;
        for (bool found = false; !found; ++i) {
          ASSERT_LT(i, dir.size());
          BlockAt b = Block(image, d, i);
          BlockHeader h;
          std::memcpy(&h, b.bytes, sizeof(h));
          const auto* off =
              reinterpret_cast<const uint32_t*>(b.bytes + sizeof(BlockHeader));
          for (uint32_t j = 0; j < h.vertex_count && !found; ++j) {
            const VertexId v = h.first_vertex + j;
            if (off[j] == off[j + 1]) continue;
            if (!compress) {
              // Its first target: past the last vertex.
              at = b.image_offset + sizeof(BlockHeader) +
                   4 * (uint64_t{h.vertex_count} + 1) + 4 * uint64_t{off[j]};
              const VertexId bad = static_cast<VertexId>(n + 5);
              forged.resize(4);
              std::memcpy(forged.data(), &bad, 4);
              victim = v;
              found = true;
              continue;
            }
            // Its first target, relative to it, set to the largest value
            // of the varint's length: v + 2^(7L-1) - 1, past n when that
            // is at least n - v.
            uint64_t begin, end;
            if (!FirstVarint(b.bytes, j, &begin, &end)) continue;
            const uint64_t x = (uint64_t{1} << (7 * (end - begin) - 1)) - 1;
            if (v + x < n) continue;
            std::vector<std::byte> copy(b.bytes, b.bytes + h.length);
            PutVarint(copy.data(), begin, end, 2 * x);
            at = b.image_offset + begin;
            forged.assign(copy.begin() + begin, copy.begin() + end);
            victim = v;
            found = true;
          }
        }
        // As a forged WRITE would: straight into the store region (one
        // memory node: its region is the whole image).
        ASSERT_TRUE((*c)->memory_node(0)
                        .ServeWrite(transport::kStoreRegion, at, forged.data(),
                                    static_cast<uint32_t>(forged.size()))
                        .ok());
        ASSERT_TRUE((*c)->RestartEngines(eo).ok());
        absl::Status status;
        if (d == Direction::kOut) {
          status = algorithms::Bfs((*c)->engine(), victim).status();
        } else {
          status = algorithms::PageRank((*c)->engine(), 2, 0).status();
        }
        ASSERT_FALSE(status.ok()) << "the forged id reached the algorithm";
        EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
        EXPECT_NE(status.message().find("not a vertex"), std::string::npos)
            << status;
        std::printf("  %s\n", std::string(status.message()).c_str());
      }
    }
  }
}

// Parse names the block and the vertex whose target is not a vertex; an id
// of n - 1 is one.
TEST(BlockValidationTest, ParseChecksTargetsAgainstTheVertexCount) {
  // One block: vertices 10..12, edges 0->{1, 2}, 1->{}, 2->{7}.
  std::vector<uint64_t> words(store::BlockBytes(3, 3, false) / 8, 0);
  auto* p = reinterpret_cast<std::byte*>(words.data());
  BlockHeader h{store::kBlockMagic,
                0,
                10,
                3,
                3,
                static_cast<uint32_t>(words.size() * 8),
                0};
  std::memcpy(p, &h, sizeof(h));
  const uint32_t offsets[] = {0, 2, 2, 3};
  std::memcpy(p + sizeof(h), offsets, sizeof(offsets));
  auto* targets = reinterpret_cast<VertexId*>(p + sizeof(h) + sizeof(offsets));
  targets[0] = 1;
  targets[1] = 2;
  targets[2] = 7;
  const std::span<const std::byte> bytes(p, words.size() * 8);
  EXPECT_TRUE(store::BlockView::Parse(bytes, 8).ok());
  absl::StatusOr<store::BlockView> b = store::BlockView::Parse(bytes, 7);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(b.status().message().find("block at vertex 10"), std::string::npos)
      << b.status();
  EXPECT_NE(b.status().message().find("of vertex 12"), std::string::npos)
      << b.status();
  targets[0] = 0xFFFFFFFFu;
  b = store::BlockView::Parse(bytes, 8);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("of vertex 10"), std::string::npos)
      << b.status();
}

// AnyIdAtLeast against a plain loop: every length up to 100 (each vector
// width's main loop and its tail), the one id at or past n at every
// position, n at the edges of the 32-bit range, and ids that only an
// unsigned compare sees as large.
TEST(BlockValidationTest, AnyIdAtLeastIsAPlainLoopsAnswer) {
  std::mt19937 rng(7);
  for (const uint64_t n : {uint64_t{1}, uint64_t{1000}, uint64_t{1} << 31,
                           uint64_t{0xFFFFFFFF}, uint64_t{1} << 32}) {
    for (size_t len = 0; len <= 100; ++len) {
      std::vector<VertexId> ids(len);
      for (VertexId& x : ids) {
        x = static_cast<VertexId>(
            n > 1 ? rng() % std::min<uint64_t>(n - 1, 1u << 30) : 0);
      }
      auto plain = [&] {
        for (VertexId x : ids) {
          if (x >= n) return true;
        }
        return false;
      };
      ASSERT_EQ(store::AnyIdAtLeast(ids, n), plain()) << len << " " << n;
      ASSERT_EQ(store::AnyIdAtLeastWithoutAvx2(ids, n), plain())
          << len << " " << n;
      for (size_t at = 0; at < len; ++at) {
        for (const uint64_t bad :
             {n, n + 1, uint64_t{0x80000000}, uint64_t{0xFFFFFFFF}}) {
          if (bad > 0xFFFFFFFF) continue;
          const VertexId keep = ids[at];
          ids[at] = static_cast<VertexId>(bad);
          ASSERT_EQ(store::AnyIdAtLeast(ids, n), plain())
              << "len " << len << ", n " << n << ", id " << bad << " at " << at;
          ASSERT_EQ(store::AnyIdAtLeastWithoutAvx2(ids, n), plain())
              << "16-byte vectors, len " << len << ", at " << at;
          ids[at] = keep;
        }
      }
    }
  }
}

}  // namespace
}  // namespace dmg
