// Weakly connected components on several compute nodes (`cc` there; one
// node runs Afforest, cc.cc). A node writes only its own vertices' labels,
// so Afforest's links, which hook any vertex's root, become two phases:
//  1. Local forests. Each node links the arcs whose ends it both owns, in a
//     union-find over its range kept in its own memory (the larger root
//     hooked under the smaller, as Afforest does), and compresses it: each
//     own vertex's label is the smallest id of its local component. Every
//     own adjacency is read once. A vertex with an arc to or from another
//     node's vertex is a boundary vertex. Stage 2: a node done with its
//     own units may take another's (where the steal model says that pays)
//     and links their arcs in a forest of its own over that node's range;
//     it then sends the owner, for each vertex those arcs joined to a
//     smaller one, that forest's root (and the boundary marks). The owner
//     links each pair: the same components, since a spanning forest of
//     the taken arcs joins what they join.
//  2. Labels across the cut. Boundary vertices whose label dropped offer it
//     along their arcs (Min, combined per owner); a vertex whose label
//     dropped lowers its local root's, and every own vertex then takes its
//     root's. (Offers along arcs inside a range change nothing: a round
//     starts with every local component at one label. They are not
//     filtered out, since a node that steals a work item pushes the
//     owner's arcs and cannot tell them by its own range.) The supersteps
//     are about the diameter of the graph of local components, not of the
//     graph: road-NY takes 7 on 2 nodes, label propagation ~540.
// Why that is the smallest id: a root's label is the least of its
// members' and every member takes it, so the ends of an arc inside a
// range agree; a boundary vertex offers every label it takes across each
// of its crossing arcs, so at the fixpoint the ends of those agree too.
// Labels are ids of the component's vertices and only fall, and the
// smallest vertex keeps its own id (it is its local root), so the one
// label left in a component is its smallest id.
//
// Where most arcs cross (a kron graph: every node's piece of the giant
// component has arcs to every other's) the second phase would read nearly
// every adjacency again in each of its first rounds, and label propagation
// reads less. The first units of phase 1 are a sample: when more than a
// quarter of the sampled arcs cross, every node (deciding on the same
// sums) runs label propagation instead (cc_lp.cc).
//
// Resumable: the phase and the frontier are carried. A job resumed in
// phase 2 builds its forests again (the labels it kept are at or below
// their roots', which the roots then take).
#include <algorithm>
#include <atomic>
#include <memory>
#include <numeric>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "algorithms/algorithms.h"

namespace dmg::algorithms {

namespace {

constexpr double kMaxCrossShare = 0.25;
constexpr uint64_t kChunk = 4096;  // stage 1 cuts ranges at multiples
constexpr uint64_t kSampleChunks = 4;

enum Phase : int { kFresh = 0, kPropagate = 1, kAcrossTheCut = 2 };

// A union-find over one node's range, with a mark per boundary vertex and
// each root's label. Links and root labels are lock-free (workers run in
// parallel); a vertex's adjacency goes to one worker, so its marks are
// plain stores.
class LocalForest {
 public:
  // `taker`: a forest over another node's range (TakenForests), which
  // needs no seen marks and no root labels.
  LocalForest(VertexId begin, VertexId end, bool taker = false)
      : begin_(begin),
        parent_(end - begin),
        boundary_(end - begin, 0),
        seen_(taker ? 0 : end - begin, 0) {
    std::iota(parent_.begin(), parent_.end(), begin);
  }

  bool Owns(VertexId v) const { return v - begin_ < parent_.size(); }

  // Hooks the larger of u's and v's roots under the smaller (util.h).
  void Link(VertexId u, VertexId v) { HookRoots(*this, u, v); }
  // What HookRoots walks: this range's parents.
  VertexId Get(VertexId v) const { return Load(parent_[v - begin_]); }
  bool CompareExchange(VertexId v, VertexId expected, VertexId desired) {
    return std::atomic_ref<VertexId>(parent_[v - begin_])
        .compare_exchange_strong(expected, desired, std::memory_order_relaxed);
  }
  bool failed() const { return false; }
  // Every vertex points at its root, whose label starts as its own id.
  void Compress() {
    CompressRoots();
    root_label_ = parent_;
  }
  // Every vertex points at its root.
  void CompressRoots() {
    for (VertexId& p : parent_) {
      while (parent_[p - begin_] != p) p = parent_[p - begin_];
    }
  }
  VertexId Root(VertexId v) const { return parent_[v - begin_]; }
  VertexId RootLabel(VertexId v) const {
    return Load(root_label_[Root(v) - begin_]);
  }
  void LowerRoot(VertexId v, VertexId label) {
    std::atomic_ref<VertexId> x(root_label_[Root(v) - begin_]);
    VertexId old = x.load(std::memory_order_relaxed);
    while (label < old &&
           !x.compare_exchange_weak(old, label, std::memory_order_relaxed)) {
    }
  }

  void MarkBoundary(VertexId v) { boundary_[v - begin_] = 1; }
  bool boundary(VertexId v) const { return boundary_[v - begin_] != 0; }
  // Whether phase 1 has linked v's out-arcs (the sample's units first).
  // (Relaxed atomics: another unit's `want` may look at a vertex split
  // over two units while a worker marks it.)
  void MarkSeen(VertexId v) {
    std::atomic_ref<uint8_t>(seen_[v - begin_])
        .store(1, std::memory_order_relaxed);
  }
  bool AnyUnseen(VertexId begin, VertexId end) const {
    begin = std::max(begin, begin_);
    end = std::min<uint64_t>(end, begin_ + parent_.size());
    for (VertexId v = begin; v < end; ++v) {
      if (std::atomic_ref<uint8_t>(const_cast<uint8_t&>(seen_[v - begin_]))
              .load(std::memory_order_relaxed) == 0) {
        return true;
      }
    }
    return false;
  }

 private:
  static VertexId Load(const VertexId& x) {
    return std::atomic_ref<VertexId>(const_cast<VertexId&>(x))
        .load(std::memory_order_relaxed);
  }
  VertexId begin_;
  std::vector<VertexId> parent_, root_label_;
  std::vector<uint8_t> boundary_, seen_;
};

struct ArcCounts {
  uint64_t arcs = 0, crossing = 0;
};

// Links u's arcs that stay in f's range and marks u when any leaves it;
// returns how many leave.
uint64_t LinkOrMark(LocalForest& f, VertexId u, std::span<const VertexId> out) {
  uint64_t crossing = 0;
  for (VertexId x : out) {
    if (f.Owns(x)) {
      f.Link(u, x);
    } else {
      f.MarkBoundary(u);
      ++crossing;
    }
  }
  return crossing;
}

// Whether [b, e) holds a chunk of phase 1's sample of the range
// [begin, end): kSampleChunks chunks spread over it (all of a small
// range). A function of the range alone, so any node can tell which of
// another node's units its sample read.
bool InSample(VertexId begin, VertexId end, VertexId b, VertexId e) {
  const uint64_t chunks = (end - begin + kChunk - 1) / kChunk;
  const uint64_t stride = std::max<uint64_t>(1, chunks / kSampleChunks);
  b = std::max(b, begin);
  e = std::min(e, end);
  for (uint64_t c = (b - begin) / kChunk;
       b < e && c <= (e - 1 - begin) / kChunk; ++c) {
    if (c % stride == stride / 2) return true;
  }
  return false;
}

// A taker's forests (stage 2 of phase 1): for each node whose units it
// takes, a forest over that node's range, made when first needed, in which
// it links the taken arcs inside the range and marks the taken vertices
// with arcs leaving it. 5 bytes a vertex of each such range (the owner's
// own forest takes 10 of its range): a compute node's memory outside the
// cache bound, as the owner's forest is.
class TakenForests {
 public:
  explicit TakenForests(Engine& engine)
      : engine_(engine), forests_(engine.compute_nodes()) {}

  // The forest over the range holding v (another node's).
  LocalForest& Of(VertexId v) {
    const int node = engine_.OwnerOf(v);
    absl::MutexLock lock(&mu_);
    if (forests_[node] == nullptr) {
      const auto [begin, end] = engine_.RangeOf(node);
      forests_[node] = std::make_unique<LocalForest>(begin, end, true);
    }
    return *forests_[node];
  }

  // What the owners take in, ascending: for every vertex whose taken arcs
  // joined it to a smaller one, or that they marked, (v, its root there |
  // 1 << 32 when marked). Linking each v with that root joins what the
  // taken arcs join (the forest spans them).
  std::vector<compute::RemoteUpdate<uint64_t>> Links() {
    absl::MutexLock lock(&mu_);
    std::vector<compute::RemoteUpdate<uint64_t>> links;
    for (int node = 0; node < static_cast<int>(forests_.size()); ++node) {
      if (forests_[node] == nullptr) continue;
      LocalForest& f = *forests_[node];
      f.CompressRoots();
      const auto [begin, end] = engine_.RangeOf(node);
      for (VertexId v = begin; v < end; ++v) {
        const VertexId root = f.Root(v);
        if (root != v || f.boundary(v)) {
          links.push_back(
              {v, root | (f.boundary(v) ? uint64_t{1} << 32 : uint64_t{0})});
        }
      }
    }
    return links;
  }

 private:
  Engine& engine_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<LocalForest>> forests_ ABSL_GUARDED_BY(mu_);
};

// Phase 1's scan of the out-arcs of the units `want` accepts (each vertex
// once: a unit read in the sample is not read again): links the arcs inside
// the range, marks the ends of the others, counts both.
absl::StatusOr<ArcCounts> LinkOwnArcs(
    Engine& engine, LocalForest& forest,
    const std::function<bool(VertexId, VertexId)>& want) {
  std::vector<ArcCounts> counts(engine.threads());
  DMG_RETURN_IF_ERROR(engine.ForEachAdjacency(
      Direction::kOut, &want,
      [&](int w, VertexId u, std::span<const VertexId> out) {
        if (!forest.AnyUnseen(u, u + 1)) return;  // (u is own: the API's)
        forest.MarkSeen(u);
        counts[w].arcs += out.size();
        counts[w].crossing += LinkOrMark(forest, u, out);
      }));
  ArcCounts all;
  for (const ArcCounts& c : counts) {
    all.arcs += c.arcs;
    all.crossing += c.crossing;
  }
  return all;
}

// The rest of phase 1's out-arcs (the units the sample did not read;
// every unit when `sampled` is false: a resumed job), with stage 2: a node
// done with its own units may take other nodes' and link their arcs in a
// forest of its own over the owner's range (TakenForests); the owners then
// link in what the takers' forests joined and marked.
absl::Status LinkRestShared(Engine& engine, LocalForest& forest, bool sampled) {
  const VertexId own_begin = engine.own_begin(), own_end = engine.own_end();
  // (b, e) lies in one node's range: this node's units, or (taking) another
  // node's, whose sample is known from its range alone.
  const std::function<bool(VertexId, VertexId)> rest = [&](VertexId b,
                                                           VertexId e) {
    if (b < own_end && e > own_begin) return forest.AnyUnseen(b, e);
    if (!sampled) return true;
    const auto [begin, end] = engine.RangeOf(engine.OwnerOf(b));
    return !InSample(begin, end, b, e);
  };
  TakenForests taken(engine);
  std::vector<LocalForest*> last(engine.threads(), nullptr);  // per worker
  DMG_ASSIGN_OR_RETURN(
      const bool shared,
      engine.ForEachAdjacencyShared(
          Direction::kOut, &rest,
          [&](int, VertexId u, std::span<const VertexId> out) {
            if (!forest.AnyUnseen(u, u + 1)) return;
            forest.MarkSeen(u);
            LinkOrMark(forest, u, out);
          },
          [&](int w, VertexId u, std::span<const VertexId> out) {
            if (last[w] == nullptr || !last[w]->Owns(u)) last[w] = &taken.Of(u);
            LinkOrMark(*last[w], u, out);
          }));
  if (!shared) return absl::OkStatus();
  const std::vector<compute::RemoteUpdate<uint64_t>> links = taken.Links();
  DMG_ASSIGN_OR_RETURN(
      const std::vector<compute::RemoteUpdate<uint64_t>> got,
      engine.SendToOwners<uint64_t>(
          std::span<const compute::RemoteUpdate<uint64_t>>(links)));
  for (const compute::RemoteUpdate<uint64_t>& l : got) {
    const VertexId root = static_cast<VertexId>(l.x);
    if (!forest.Owns(root)) {
      return absl::DataLossError(absl::StrFormat(
          "cc: a taken unit's link joins vertex %d to %d, outside its range",
          l.v, root));
    }
    if (root != l.v) forest.Link(l.v, root);
    if ((l.x >> 32) != 0) forest.MarkBoundary(l.v);
  }
  return absl::OkStatus();
}

// The rest of phase 1 (every unit not yet scanned; on a directed graph
// also the in-arcs, for the boundary marks), then the labels: each own
// vertex's root's.
absl::Status FinishForest(Engine& engine, LocalForest& forest,
                          compute::State<VertexId>& label, bool fresh) {
  DMG_RETURN_IF_ERROR(LinkRestShared(engine, forest, /*sampled=*/fresh));
  if (!engine.symmetric()) {
    DMG_RETURN_IF_ERROR(engine.ForEachAdjacency(
        Direction::kIn, nullptr,
        [&](int, VertexId u, std::span<const VertexId> in) {
          for (VertexId x : in) {
            if (!forest.Owns(x)) {
              forest.MarkBoundary(u);
              return;
            }
          }
        }));
  }
  forest.Compress();
  if (fresh) {
    return engine.VertexMap([&](VertexId v) { label.Set(v, forest.Root(v)); });
  }
  // Resumed: the kept labels are at or below their roots'.
  return engine.VertexMap(
      [&](VertexId v) { forest.LowerRoot(v, label.Get(v)); });
}

// Phase 2, from `frontier` (boundary vertices whose label dropped).
absl::Status AcrossTheCut(Engine& engine, LocalForest& forest,
                          compute::State<VertexId>& label,
                          compute::Frontier& frontier) {
  std::vector<Direction> along = {Direction::kOut};
  if (!engine.symmetric()) along.push_back(Direction::kIn);
  while (!frontier.empty()) {
    DMG_ASSIGN_OR_RETURN(
        compute::Frontier changed,
        OfferLabels(engine, frontier, along, compute::Mode::kPush, label));
    DMG_RETURN_IF_ERROR(engine.VertexMap(
        changed, [&](VertexId v) { forest.LowerRoot(v, label.Get(v)); }));
    DMG_ASSIGN_OR_RETURN(frontier, engine.VertexFilter([&](VertexId v) {
      bool dropped = changed.Contains(v);
      const VertexId root = forest.RootLabel(v);
      if (root < label.Get(v)) {
        label.Set(v, root);
        dropped = true;
      }
      return dropped && forest.boundary(v);
    }));
    DMG_RETURN_IF_ERROR(engine.EndSuperstep());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<VertexId>> ConnectedComponentsOnNodes(
    Engine& engine) {
  auto& label = engine.NewState<VertexId>("cc.label", 0);
  int phase = kFresh;
  compute::Frontier frontier = engine.NewFrontier();
  engine.Carry("cc.phase", &phase);
  engine.Carry("cc.frontier", &frontier);
  DMG_ASSIGN_OR_RETURN(const bool resumed, engine.Resume());
  (void)resumed;  // the phase says where to go on
  const VertexId begin = engine.own_begin(), end = engine.own_end();
  LocalForest forest(begin, end);
  if (phase == kFresh) {
    const std::function<bool(VertexId, VertexId)> sampled =
        [&](VertexId b, VertexId e) { return InSample(begin, end, b, e); };
    DMG_ASSIGN_OR_RETURN(const ArcCounts mine,
                         LinkOwnArcs(engine, forest, sampled));
    DMG_ASSIGN_OR_RETURN(const uint64_t arcs,
                         engine.AllReduce<compute::Add>(mine.arcs));
    DMG_ASSIGN_OR_RETURN(const uint64_t crossing,
                         engine.AllReduce<compute::Add>(mine.crossing));
    if (static_cast<double>(crossing) >
        kMaxCrossShare * static_cast<double>(arcs)) {
      phase = kPropagate;
      DMG_ASSIGN_OR_RETURN(frontier, engine.VertexFilter([&](VertexId v) {
        label.Set(v, v);
        return true;
      }));
    } else {
      DMG_RETURN_IF_ERROR(FinishForest(engine, forest, label, /*fresh=*/true));
      DMG_ASSIGN_OR_RETURN(frontier, engine.VertexFilter([&](VertexId v) {
        return forest.boundary(v);
      }));
      phase = kAcrossTheCut;
    }
    DMG_RETURN_IF_ERROR(engine.EndSuperstep());
  } else if (phase == kAcrossTheCut) {
    DMG_RETURN_IF_ERROR(FinishForest(engine, forest, label, /*fresh=*/false));
  }
  if (phase == kPropagate) {
    DMG_RETURN_IF_ERROR(PropagateLabels(engine, label, frontier));
  } else {
    DMG_RETURN_IF_ERROR(AcrossTheCut(engine, forest, label, frontier));
  }
  return engine.Result(label);
}

}  // namespace dmg::algorithms
