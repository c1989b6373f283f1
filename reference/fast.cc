// Parallel, optimized reference implementations for the benchmarks. Each is
// tested against its plain counterpart in simple.cc (tests/reference_test.cc)
// and produces the same result for every thread count.
//
// Threads: a small team started once per call; Team::Run(fn) runs fn(t) on
// every member (the caller is member 0) and returns when all are done, which
// also orders memory between phases. Shared arrays written concurrently are
// accessed through std::atomic_ref.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/parallel.h"
#include "reference/reference.h"
#include "store/graph.h"

namespace dmg::reference::fast {
namespace {

// Waiting threads spin a little, then yield, then block: BFS on a
// high-diameter graph runs hundreds of short phases, where a condition
// variable wake-up per phase would cost more than the work. Yielding keeps an
// oversubscribed machine usable.
constexpr int kPauseRounds = 64;
constexpr int kYieldRounds = 256;

// Returns false when the caller should stop spinning and block.
inline bool SpinWait(int round) {
  if (round < kPauseRounds) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    return true;
  }
  std::this_thread::yield();
  return round < kPauseRounds + kYieldRounds;
}

class Team {
 public:
  explicit Team(int threads) : size_(threads > 0 ? threads : DefaultThreads()) {
    for (int t = 1; t < size_; ++t) {
      workers_.emplace_back([this, t] { Serve(t); });
    }
  }
  ~Team() {
    stop_.store(true, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mu_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    start_.notify_all();
    for (std::thread& w : workers_) w.join();
  }
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  int size() const { return size_; }

  // Runs fn(t) for t in [0, size()) in parallel; returns when all are done.
  // Everything written before Run is visible to fn, and everything fn writes
  // is visible after Run.
  void Run(const std::function<void(int)>& fn) {
    if (size_ == 1) {
      fn(0);
      return;
    }
    fn_ = &fn;
    pending_.store(size_ - 1, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mu_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    start_.notify_all();
    fn(0);
    auto finished = [this] {
      return pending_.load(std::memory_order_acquire) == 0;
    };
    for (int i = 0; !finished() && SpinWait(i); ++i) {
    }
    if (!finished()) {
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, finished);
    }
    fn_ = nullptr;
  }

 private:
  void Serve(int t) {
    uint64_t seen = 0;
    while (true) {
      uint64_t now = seen;
      auto started = [&] {
        now = generation_.load(std::memory_order_acquire);
        return now != seen;
      };
      for (int i = 0; !started() && SpinWait(i); ++i) {
      }
      if (now == seen) {
        std::unique_lock<std::mutex> lock(mu_);
        start_.wait(lock, started);
      }
      seen = now;
      if (stop_.load(std::memory_order_relaxed)) return;
      (*fn_)(t);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);
        done_.notify_one();
      }
    }
  }

  const int size_;
  std::vector<std::thread> workers_;
  std::mutex mu_;  // with the condition variables, for sleeping only
  std::condition_variable start_;
  std::condition_variable done_;
  const std::function<void(int)>* fn_ = nullptr;  // published by generation_
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

// Start of part t when [0, n) is cut into `parts` contiguous parts.
uint64_t PartStart(uint64_t n, int parts, int t) { return n * t / parts; }

// Hands out [0, n) in chunks of `chunk` to whichever thread asks next and
// calls fn(begin, end) on each. Every thread of a Run calls it with the same
// cursor (initially 0).
template <typename Fn>
void ForChunks(std::atomic<uint64_t>& cursor, uint64_t n, uint64_t chunk,
               Fn&& fn) {
  while (true) {
    uint64_t begin = cursor.fetch_add(chunk, std::memory_order_relaxed);
    if (begin >= n) return;
    fn(begin, std::min(n, begin + chunk));
  }
}

// Vertex boundaries (parts + 1 of them) giving each part about the same
// number of vertices plus arcs of `csr`. A pure function of (csr, parts).
std::vector<uint64_t> BalancedBounds(const store::Csr& csr, int parts) {
  const uint64_t n = csr.num_vertices;
  const uint64_t total = n + csr.num_arcs();
  std::vector<uint64_t> bounds(parts + 1, n);
  bounds[0] = 0;
  for (int t = 1; t < parts; ++t) {
    // Smallest v with offsets[v] + v >= target (monotonic in v).
    const uint64_t target = total * t / parts;
    uint64_t lo = bounds[t - 1], hi = n;
    while (lo < hi) {
      uint64_t mid = lo + (hi - lo) / 2;
      if (csr.offsets[mid] + mid < target) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    bounds[t] = lo;
  }
  return bounds;
}

// ---------------------------------------------------------------- PageRank

}  // namespace

absl::StatusOr<PageRankResult> PageRank(const store::Graph& graph,
                                        int max_iters, double tolerance,
                                        int threads) {
  if (absl::Status s = CheckPageRankArgs(max_iters); !s.ok()) return s;
  Team team(threads);
  const int parts = team.size();
  const uint64_t n = graph.num_vertices();
  const double base = (1.0 - kDamping) / static_cast<double>(n);
  const std::vector<uint64_t> bounds = BalancedBounds(graph.in, parts);
  const store::Csr& in = graph.in;
  const store::Csr& out = graph.out;

  std::vector<double> old_scores(n), new_scores(n);
  // contrib[u] = old(u)/outdeg(u): computed once per vertex and iteration,
  // with exactly the operands the simple version uses per arc.
  std::vector<double> contrib(n), next_contrib(n);
  team.Run([&](int t) {
    for (uint64_t v = PartStart(n, parts, t); v < PartStart(n, parts, t + 1);
         ++v) {
      old_scores[v] = 1.0 / static_cast<double>(n);
      const uint64_t degree = out.degree(v);
      contrib[v] =
          degree == 0 ? 0.0 : old_scores[v] / static_cast<double>(degree);
    }
  });

  PageRankResult result;
  std::vector<double> partial_l1(parts);
  while (true) {
    team.Run([&](int t) {
      double l1 = 0.0;
      for (uint64_t v = bounds[t]; v < bounds[t + 1]; ++v) {
        double sum = 0.0;
        for (VertexId u : in.neighbors(v)) sum += contrib[u];
        const double score = base + kDamping * sum;
        new_scores[v] = score;
        l1 += std::abs(score - old_scores[v]);
        const uint64_t degree = out.degree(v);
        next_contrib[v] =
            degree == 0 ? 0.0 : score / static_cast<double>(degree);
      }
      partial_l1[t] = l1;
    });
    double l1 = 0.0;
    for (double p : partial_l1) l1 += p;  // thread order: deterministic
    result.iterations += 1;
    result.last_l1 = l1;
    std::swap(old_scores, new_scores);
    std::swap(contrib, next_contrib);
    if (l1 < tolerance || result.iterations == max_iters) break;
  }
  result.scores = std::move(old_scores);
  return result;
}

// --------------------------------------------------------------------- BFS

namespace {

constexpr uint64_t kTopDownChunk = 64;  // frontier vertices per grab
constexpr uint64_t kBottomUpChunk = 8;  // bitmap words (x64 vertices) per grab
constexpr uint64_t kSerialFrontier = 256;  // smaller frontiers: one thread
constexpr int64_t kAlpha = 15;
constexpr int64_t kBeta = 18;

struct Bitmap {
  explicit Bitmap(uint64_t n) : words((n + 63) / 64) {}
  bool Get(VertexId v) const { return (words[v >> 6] >> (v & 63)) & 1; }
  std::vector<uint64_t> words;
};

// State shared by the BFS steps.
struct BfsState {
  BfsState(const store::Graph& graph, uint64_t source, int threads)
      : graph(graph),
        team(threads),
        depth(graph.num_vertices(), kUnreached),
        frontier(graph.num_vertices()),
        local(team.size()) {
    depth[source] = 0;
    frontier[0] = static_cast<VertexId>(source);
    frontier_size = 1;
  }

  const store::Graph& graph;
  Team team;
  std::vector<int32_t> depth;
  std::vector<VertexId> frontier;  // first frontier_size entries
  uint64_t frontier_size = 0;
  std::vector<std::vector<VertexId>> local;  // per-thread discoveries
};

// Moves the per-thread buffers, in thread order, into s.frontier.
void GatherFrontier(BfsState& s) {
  const int parts = s.team.size();
  std::vector<uint64_t> offset(parts + 1, 0);
  for (int t = 0; t < parts; ++t) offset[t + 1] = offset[t] + s.local[t].size();
  if (offset[parts] < kSerialFrontier) {
    for (int t = 0; t < parts; ++t) {
      std::copy(s.local[t].begin(), s.local[t].end(),
                s.frontier.begin() + offset[t]);
    }
  } else {
    s.team.Run([&](int t) {
      std::copy(s.local[t].begin(), s.local[t].end(),
                s.frontier.begin() + offset[t]);
    });
  }
  s.frontier_size = offset[parts];
}

// Expands s.frontier (depth next_depth - 1) along out-arcs; the new frontier
// replaces it. Returns the out-arcs of the new frontier (Beamer's m_f).
int64_t TopDownStep(BfsState& s, int32_t next_depth) {
  const store::Csr& out = s.graph.out;
  const int parts = s.team.size();
  std::vector<int64_t> scout(parts, 0);
  std::atomic<uint64_t> cursor{0};
  auto work = [&](int t) {
    std::vector<VertexId>& found = s.local[t];
    found.clear();
    int64_t arcs = 0;
    ForChunks(cursor, s.frontier_size, kTopDownChunk,
              [&](uint64_t begin, uint64_t end) {
                for (uint64_t i = begin; i < end; ++i) {
                  for (VertexId v : out.neighbors(s.frontier[i])) {
                    std::atomic_ref<int32_t> depth(s.depth[v]);
                    int32_t expected = kUnreached;
                    if (depth.load(std::memory_order_relaxed) == kUnreached &&
                        depth.compare_exchange_strong(
                            expected, next_depth, std::memory_order_relaxed)) {
                      found.push_back(v);
                      arcs += static_cast<int64_t>(out.degree(v));
                    }
                  }
                }
              });
    scout[t] = arcs;
  };
  if (s.frontier_size < kSerialFrontier) {
    for (int t = 1; t < parts; ++t) s.local[t].clear();
    work(0);
  } else {
    s.team.Run(work);
  }
  GatherFrontier(s);
  int64_t total = 0;
  for (int64_t a : scout) total += a;
  return total;
}

// Sets the bits of the vertices at depth `level`.
void FrontierBitmap(BfsState& s, int32_t level, Bitmap& bitmap) {
  const uint64_t n = s.graph.num_vertices();
  const int parts = s.team.size();
  const uint64_t words = bitmap.words.size();
  s.team.Run([&](int t) {
    for (uint64_t w = PartStart(words, parts, t);
         w < PartStart(words, parts, t + 1); ++w) {
      uint64_t bits = 0;
      for (uint64_t v = w * 64; v < std::min(n, w * 64 + 64); ++v) {
        if (s.depth[v] == level) bits |= uint64_t{1} << (v & 63);
      }
      bitmap.words[w] = bits;
    }
  });
}

// Every unreached vertex with an in-neighbour in `front` gets next_depth and
// its bit in `next`. Each thread owns whole bitmap words, so no atomics.
// Returns the number of vertices reached.
uint64_t BottomUpStep(BfsState& s, int32_t next_depth, const Bitmap& front,
                      Bitmap& next) {
  const store::Csr& in = s.graph.in;
  const uint64_t n = s.graph.num_vertices();
  const int parts = s.team.size();
  std::vector<uint64_t> awake(parts, 0);
  std::atomic<uint64_t> cursor{0};
  s.team.Run([&](int t) {
    uint64_t count = 0;
    ForChunks(cursor, next.words.size(), kBottomUpChunk,
              [&](uint64_t begin, uint64_t end) {
                for (uint64_t w = begin; w < end; ++w) {
                  uint64_t bits = 0;
                  for (uint64_t v = w * 64; v < std::min(n, w * 64 + 64); ++v) {
                    if (s.depth[v] != kUnreached) continue;
                    for (VertexId u : in.neighbors(v)) {
                      if (front.Get(u)) {
                        s.depth[v] = next_depth;
                        bits |= uint64_t{1} << (v & 63);
                        ++count;
                        break;
                      }
                    }
                  }
                  next.words[w] = bits;
                }
              });
    awake[t] = count;
  });
  uint64_t total = 0;
  for (uint64_t a : awake) total += a;
  return total;
}

// The vertices of `bitmap`, in id order, become s.frontier.
void BitmapToFrontier(BfsState& s, const Bitmap& bitmap) {
  const int parts = s.team.size();
  const uint64_t words = bitmap.words.size();
  s.team.Run([&](int t) {
    std::vector<VertexId>& found = s.local[t];
    found.clear();
    for (uint64_t w = PartStart(words, parts, t);
         w < PartStart(words, parts, t + 1); ++w) {
      for (uint64_t bits = bitmap.words[w]; bits != 0; bits &= bits - 1) {
        found.push_back(static_cast<VertexId>(w * 64 + std::countr_zero(bits)));
      }
    }
  });
  GatherFrontier(s);
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> BfsTopDown(const store::Graph& graph,
                                                uint64_t source, int threads) {
  if (absl::Status s = CheckSource(graph, source); !s.ok()) return s;
  BfsState s(graph, source, threads);
  for (int32_t level = 0; s.frontier_size > 0; ++level) {
    TopDownStep(s, level + 1);
  }
  return std::move(s.depth);
}

// Beamer et al., "Direction-optimizing breadth-first search" (SC'12), with
// GAPBS's switching rule: go bottom-up when the frontier's out-arcs exceed
// 1/alpha of the arcs not yet explored; come back top-down once the frontier
// shrinks and holds fewer than n/beta vertices.
absl::StatusOr<std::vector<int32_t>> BfsDirectionOptimizing(
    const store::Graph& graph, uint64_t source, int threads) {
  if (absl::Status s = CheckSource(graph, source); !s.ok()) return s;
  BfsState s(graph, source, threads);
  const uint64_t n = graph.num_vertices();
  Bitmap front(n), next(n);
  int64_t edges_to_check = static_cast<int64_t>(graph.num_arcs());
  int64_t scout = static_cast<int64_t>(graph.out.degree(source));
  int32_t level = 0;
  while (s.frontier_size > 0) {
    if (scout > edges_to_check / kAlpha) {
      FrontierBitmap(s, level, front);
      uint64_t awake = s.frontier_size, old_awake;
      do {
        old_awake = awake;
        awake = BottomUpStep(s, level + 1, front, next);
        std::swap(front, next);
        ++level;
      } while (awake >= old_awake || awake > n / kBeta);
      BitmapToFrontier(s, front);
      scout = 1;
    } else {
      edges_to_check -= scout;
      scout = TopDownStep(s, level + 1);
      ++level;
    }
  }
  return std::move(s.depth);
}

// ---------------------------------------------------------------------- CC

namespace {

constexpr int kNeighborRounds = 2;
constexpr int kSamples = 1024;
constexpr uint64_t kCcChunk = 1024;

VertexId Load(std::vector<VertexId>& comp, VertexId v) {
  return std::atomic_ref<VertexId>(comp[v]).load(std::memory_order_acquire);
}

// Joins the trees of u and v by hooking the larger root under the smaller
// (so comp[x] <= x always holds and a root is the smallest id of its tree).
void Link(VertexId u, VertexId v, std::vector<VertexId>& comp) {
  VertexId p1 = Load(comp, u);
  VertexId p2 = Load(comp, v);
  while (p1 != p2) {
    const VertexId high = std::max(p1, p2);
    const VertexId low = std::min(p1, p2);
    VertexId p_high = Load(comp, high);
    if (p_high == low) return;  // already hooked
    if (p_high == high && std::atomic_ref<VertexId>(comp[high])
                              .compare_exchange_strong(p_high, low)) {
      return;  // hooked
    }
    p1 = Load(comp, Load(comp, high));
    p2 = Load(comp, low);
  }
}

// Points every vertex straight at its root.
void Compress(Team& team, std::vector<VertexId>& comp) {
  const uint64_t n = comp.size();
  const int parts = team.size();
  team.Run([&](int t) {
    for (uint64_t v = PartStart(n, parts, t); v < PartStart(n, parts, t + 1);
         ++v) {
      std::atomic_ref<VertexId> cv(comp[v]);
      VertexId parent = cv.load(std::memory_order_acquire);
      VertexId grandparent = Load(comp, parent);
      while (parent != grandparent) {
        parent = grandparent;
        grandparent = Load(comp, parent);
      }
      cv.store(parent, std::memory_order_release);
    }
  });
}

// The most frequent label among a fixed-seed sample (likely the giant
// component's).
VertexId SampleFrequentLabel(const std::vector<VertexId>& comp) {
  std::mt19937_64 rng(27491095);
  std::uniform_int_distribution<uint64_t> pick(0, comp.size() - 1);
  std::unordered_map<VertexId, int> counts;
  for (int i = 0; i < kSamples; ++i) ++counts[comp[pick(rng)]];
  VertexId best = comp[0];
  int best_count = 0;
  for (const auto& [label, count] : counts) {
    if (count > best_count || (count == best_count && label < best)) {
      best = label;
      best_count = count;
    }
  }
  return best;
}

}  // namespace

std::vector<VertexId> ConnectedComponents(const store::Graph& graph,
                                          int threads) {
  const uint64_t n = graph.num_vertices();
  if (n == 0) return {};
  Team team(threads);
  const int parts = team.size();
  const store::Csr& out = graph.out;
  const store::Csr& in = graph.in;
  // For a symmetric graph the in-arcs repeat the out-arcs.
  const bool symmetric = out.offsets == in.offsets && out.targets == in.targets;

  std::vector<VertexId> comp(n);
  team.Run([&](int t) {
    for (uint64_t v = PartStart(n, parts, t); v < PartStart(n, parts, t + 1);
         ++v) {
      comp[v] = static_cast<VertexId>(v);
    }
  });

  // Link along the first few out-arcs of every vertex: this typically joins
  // most of the giant component cheaply.
  for (int r = 0; r < kNeighborRounds; ++r) {
    std::atomic<uint64_t> cursor{0};
    team.Run([&](int t) {
      ForChunks(cursor, n, kCcChunk, [&](uint64_t begin, uint64_t end) {
        for (uint64_t u = begin; u < end; ++u) {
          if (static_cast<uint64_t>(r) < out.degree(u)) {
            Link(static_cast<VertexId>(u), out.targets[out.offsets[u] + r],
                 comp);
          }
        }
      });
    });
    Compress(team, comp);
  }

  // Finish: vertices of the (likely) giant component are skipped; every arc
  // touching another component is linked from that component's end (its
  // remaining out-arcs, and its in-arcs when the graph is not symmetric).
  const VertexId giant = SampleFrequentLabel(comp);
  std::atomic<uint64_t> cursor{0};
  team.Run([&](int t) {
    ForChunks(cursor, n, kCcChunk, [&](uint64_t begin, uint64_t end) {
      for (uint64_t u = begin; u < end; ++u) {
        if (Load(comp, static_cast<VertexId>(u)) == giant) continue;
        for (uint64_t i = out.offsets[u] + kNeighborRounds;
             i < out.offsets[u + 1]; ++i) {
          Link(static_cast<VertexId>(u), out.targets[i], comp);
        }
        if (!symmetric) {
          for (VertexId v : in.neighbors(u)) {
            Link(static_cast<VertexId>(u), v, comp);
          }
        }
      }
    });
  });
  Compress(team, comp);
  return comp;
}

}  // namespace dmg::reference::fast
