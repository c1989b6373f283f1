#include "store/build_graph.h"

// How BuildGraph works. Every pass is parallel over `threads`; none of them
// lets the thread count change the result.
//
//  1. Validate: src/dst/weights sizes, num_vertices <= 2^32-1, every id <
//     num_vertices. The same scan counts self-loops.
//  2. Relabel (options.relabel): the i-th smallest id that occurs in any input
//     arc (self-loops included, even when they are dropped later) becomes i.
//  3. Counting sort of the arcs by target (slot value: the source). Reverse
//     arcs for symmetrization are emitted here, never materialized as an edge
//     list: arc (u,v), u != v, yields slots for both (u,v) and (v,u).
//     Self-loops are skipped when dropped, and never doubled. The input arrays
//     are freed right after.
//  4. Counting sort of those slots by source, visiting targets in increasing
//     order: each out-list comes out sorted by target with no comparison sort
//     (arcs with equal targets, i.e. parallel arcs, stay together; a list whose
//     parallel arcs are not in weight order is then sorted).
//  5. Drop parallel arcs (keep the first = lightest per target) and compact
//     into the final out-CSR.
//  6. In-CSR: if the graph was symmetrized its arc set (weights included) is
//     symmetric, so the in-CSR equals the out-CSR and is copied. Otherwise a
//     third counting sort transposes the out-CSR; visiting sources in order
//     leaves each in-list sorted by (source, weight).
//
// Weighted arcs travel as one packed 64-bit key (id << 32 | weight with its
// sign bit flipped) so integer order is (id, weight) order.
//
// The counting sorts keep one degree histogram per thread (no atomics, and a
// key's slots land in a deterministic order). When threads x vertices
// histograms would take more memory than the arcs themselves (and over
// kMinHistogramBytes), they fall back to shared atomic counters; slot order
// then varies, so every list is sorted by its full (id, weight) key, which
// gives the same output (equal keys are indistinguishable).
//
// Report counts (all independent of the thread count):
//   input_arcs               arcs in the edge list.
//   self_loops_removed       input arcs (v,v), when options.drop_self_loops.
//   arcs_added_by_symmetrize when symmetrizing, the reverse arcs added before
//                            parallel-arc removal: one per input arc that is
//                            not a self-loop (self-loops are not doubled,
//                            whether or not they are dropped). For an
//                            undirected file that already lists both
//                            directions, all of these come back out as
//                            parallel arcs.
//   parallel_arcs_removed    arcs removed, after symmetrization, because an
//                            arc with the same (source, target) and a smaller
//                            or equal weight was kept.
//   vertices_before_relabel  edges.num_vertices as given (also when not
//                            relabelling).
// So num_arcs() == input_arcs - self_loops_removed + arcs_added_by_symmetrize
//                  - parallel_arcs_removed.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "glog/logging.h"

namespace dmg::store {
namespace {

// Per-thread histograms may always use this much memory.
constexpr uint64_t kMinHistogramBytes = uint64_t{256} << 20;

using Key = uint64_t;  // packed (id, weight), see PackKey

inline Key PackKey(VertexId id, Weight w) {
  return (static_cast<Key>(id) << 32) |
         (static_cast<uint32_t>(w) ^ 0x80000000u);
}
inline VertexId KeyId(Key k) { return static_cast<VertexId>(k >> 32); }
inline Weight KeyWeight(Key k) {
  return static_cast<Weight>(static_cast<uint32_t>(k) ^ 0x80000000u);
}

// A slot of an adjacency list under construction: the other endpoint, with
// the weight packed in when weighted (T = Key) or dropped (T = VertexId).
template <typename T>
inline T MakeSlot(VertexId id, Weight w) {
  if constexpr (std::is_same_v<T, Key>) {
    return PackKey(id, w);
  } else {
    return id;
  }
}
template <typename T>
inline VertexId SlotId(T s) {
  if constexpr (std::is_same_v<T, Key>) {
    return KeyId(s);
  } else {
    return s;
  }
}
template <typename T>
inline Weight SlotWeight(T s) {
  if constexpr (std::is_same_v<T, Key>) {
    return KeyWeight(s);
  } else {
    return 0;
  }
}

template <typename T>
void Free(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

// Logs how long each step takes (VLOG 1).
class StepTimer {
 public:
  void Step(const char* name) {
    const auto now = std::chrono::steady_clock::now();
    VLOG(1) << "BuildGraph: " << name << " "
            << std::chrono::duration<double>(now - last_).count() << " s";
    last_ = now;
  }

 private:
  std::chrono::steady_clock::time_point last_ =
      std::chrono::steady_clock::now();
};

// In-place inclusive prefix sum of a, in parallel.
void PrefixSum(std::vector<EdgeIndex>& a, int threads) {
  const size_t n = a.size();
  if (threads <= 1 || n < (size_t{1} << 16)) {
    EdgeIndex sum = 0;
    for (EdgeIndex& x : a) x = sum += x;
    return;
  }
  std::vector<EdgeIndex> block_sum(threads, 0);
  ParallelRanges(n, threads, [&](int t, size_t begin, size_t end) {
    EdgeIndex sum = 0;
    for (size_t i = begin; i < end; ++i) sum += a[i];
    block_sum[t] = sum;
  });
  EdgeIndex base = 0;
  for (EdgeIndex& s : block_sum) {
    const EdgeIndex next = base + s;
    s = base;
    base = next;
  }
  ParallelRanges(n, threads, [&](int t, size_t begin, size_t end) {
    EdgeIndex sum = block_sum[t];
    for (size_t i = begin; i < end; ++i) a[i] = sum += a[i];
  });
}

// After a scatter that post-incremented offsets[v] once per slot of v, each
// offsets[v] holds the end of v's range; shift them back to the starts.
void RestoreOffsets(std::vector<EdgeIndex>& offsets) {
  std::copy_backward(offsets.begin(), offsets.end() - 1, offsets.end());
  offsets[0] = 0;
}

// Boundaries of `parts` equal ranges of [0, n).
std::vector<uint64_t> EvenBounds(uint64_t n, int parts) {
  std::vector<uint64_t> bounds(parts + 1);
  for (int p = 0; p <= parts; ++p) {
    bounds[p] =
        static_cast<uint64_t>(static_cast<unsigned __int128>(n) * p / parts);
  }
  return bounds;
}

// Boundaries of `parts` consecutive vertex ranges of about equal cost (arcs +
// vertices) in a CSR with these offsets.
std::vector<uint64_t> BalancedBounds(const std::vector<EdgeIndex>& offsets,
                                     int parts) {
  const uint64_t n = offsets.size() - 1;
  const uint64_t total = offsets[n] + n;
  std::vector<uint64_t> bounds(parts + 1, 0);
  bounds[parts] = n;
  for (int p = 1; p < parts; ++p) {
    const uint64_t target = static_cast<uint64_t>(
        static_cast<unsigned __int128>(total) * p / parts);
    // Smallest v with offsets[v] + v >= target.
    uint64_t lo = bounds[p - 1], hi = n;
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (offsets[mid] + mid < target) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    bounds[p] = lo;
  }
  return bounds;
}

// Calls fn(part, begin, end) for each range of `bounds`, one thread per range.
template <typename Fn>
void ForEachPart(const std::vector<uint64_t>& bounds, Fn&& fn) {
  const int parts = static_cast<int>(bounds.size()) - 1;
  ParallelRanges(parts, parts, [&](int, size_t first, size_t last) {
    for (size_t p = first; p < last; ++p) {
      fn(static_cast<int>(p), bounds[p], bounds[p + 1]);
    }
  });
}

// A counting sort. emit(begin, end, sink) must call sink(key, value) for the
// slots that items [begin, end) produce, in the same order every time (it is
// called twice per range: to count, then to place). Afterwards key k's slots
// are slots[offsets[k], offsets[k + 1]). Returns true when each key's slots are
// in emission order (ranges in order, each range in its own order); false
// when memory forced the atomic fallback, whose order varies between runs.
template <typename T, typename Emit>
bool CountingSort(uint64_t num_keys, const std::vector<uint64_t>& bounds,
                  uint64_t max_slots, int threads, Emit&& emit,
                  std::vector<EdgeIndex>& offsets, std::vector<T>& slots) {
  const int parts = static_cast<int>(bounds.size()) - 1;
  offsets.assign(num_keys + 1, 0);
  if (parts == 1) {
    EdgeIndex* const count = offsets.data() + 1;
    emit(bounds[0], bounds[1], [count](VertexId key, T) { ++count[key]; });
    PrefixSum(offsets, threads);
    slots.resize(offsets[num_keys]);
    EdgeIndex* const next = offsets.data();
    T* const out = slots.data();
    emit(bounds[0], bounds[1],
         [next, out](VertexId key, T value) { out[next[key]++] = value; });
    RestoreOffsets(offsets);
    return true;
  }

  const uint64_t histogram_bytes =
      static_cast<uint64_t>(parts) * num_keys * sizeof(EdgeIndex);
  if (histogram_bytes <= std::max(kMinHistogramBytes, max_slots * sizeof(T))) {
    std::vector<std::vector<EdgeIndex>> histogram(parts);
    ForEachPart(bounds, [&](int p, uint64_t begin, uint64_t end) {
      histogram[p].assign(num_keys, 0);
      EdgeIndex* const count = histogram[p].data();
      emit(begin, end, [count](VertexId key, T) { ++count[key]; });
    });
    // Totals per key; then each part's first slot per key.
    ParallelRanges(num_keys, threads, [&](int, size_t begin, size_t end) {
      for (size_t k = begin; k < end; ++k) {
        EdgeIndex sum = 0;
        for (const auto& h : histogram) sum += h[k];
        offsets[k + 1] = sum;
      }
    });
    PrefixSum(offsets, threads);
    ParallelRanges(num_keys, threads, [&](int, size_t begin, size_t end) {
      for (size_t k = begin; k < end; ++k) {
        EdgeIndex next = offsets[k];
        for (auto& h : histogram) {
          const EdgeIndex count = h[k];
          h[k] = next;
          next += count;
        }
      }
    });
    slots.resize(offsets[num_keys]);
    T* const out = slots.data();
    ForEachPart(bounds, [&](int p, uint64_t begin, uint64_t end) {
      EdgeIndex* const next = histogram[p].data();
      emit(begin, end,
           [next, out](VertexId key, T value) { out[next[key]++] = value; });
    });
    return true;
  }

  // Fallback: shared atomic counters (no per-thread memory).
  EdgeIndex* const count = offsets.data() + 1;
  ForEachPart(bounds, [&](int, uint64_t begin, uint64_t end) {
    emit(begin, end, [count](VertexId key, T) {
      std::atomic_ref<EdgeIndex>(count[key])
          .fetch_add(1, std::memory_order_relaxed);
    });
  });
  PrefixSum(offsets, threads);
  slots.resize(offsets[num_keys]);
  EdgeIndex* const next = offsets.data();
  T* const out = slots.data();
  ForEachPart(bounds, [&](int, uint64_t begin, uint64_t end) {
    emit(begin, end, [next, out](VertexId key, T value) {
      out[std::atomic_ref<EdgeIndex>(next[key]).fetch_add(
          1, std::memory_order_relaxed)] = value;
    });
  });
  RestoreOffsets(offsets);
  return false;
}

struct ArcScan {
  VertexId max_id = 0;
  uint64_t self_loops = 0;
};

ArcScan ScanArcs(const EdgeList& edges, int threads) {
  std::vector<ArcScan> part(threads);
  ParallelRanges(edges.src.size(), threads,
                 [&](int t, size_t begin, size_t end) {
                   ArcScan scan;
                   for (size_t e = begin; e < end; ++e) {
                     const VertexId u = edges.src[e], v = edges.dst[e];
                     scan.max_id = std::max(scan.max_id, std::max(u, v));
                     scan.self_loops += u == v;
                   }
                   part[t] = scan;
                 });
  ArcScan all;
  for (const ArcScan& scan : part) {
    all.max_id = std::max(all.max_id, scan.max_id);
    all.self_loops += scan.self_loops;
  }
  return all;
}

absl::Status OutOfRangeError(const EdgeList& edges) {
  const uint64_t n = edges.num_vertices;
  for (size_t e = 0; e < edges.src.size(); ++e) {
    const VertexId u = edges.src[e], v = edges.dst[e];
    if (u >= n || v >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("arc ", e, " (", u, " -> ", v, "): vertex id ",
                       u >= n ? u : v, " is not below the vertex count ", n));
    }
  }
  return absl::InternalError("vertex id check is inconsistent");
}

// Renumbers the ids in `edges` so the i-th smallest id used becomes i, and
// sets num_vertices to the number of distinct ids.
void Relabel(EdgeList& edges, int threads) {
  const size_t m = edges.src.size();
  const uint64_t n = edges.num_vertices;
  VertexId* const src = edges.src.data();
  VertexId* const dst = edges.dst.data();
  if (n <= 2 * static_cast<uint64_t>(m) + (uint64_t{1} << 20)) {
    // Dense: mark used ids, then number them by a parallel scan.
    std::vector<uint8_t> used(n, 0);
    ParallelRanges(m, threads, [&](int, size_t begin, size_t end) {
      for (size_t e = begin; e < end; ++e) {
        std::atomic_ref<uint8_t>(used[src[e]])
            .store(1, std::memory_order_relaxed);
        std::atomic_ref<uint8_t>(used[dst[e]])
            .store(1, std::memory_order_relaxed);
      }
    });
    std::vector<uint64_t> block_base(threads, 0);
    ParallelRanges(n, threads, [&](int t, size_t begin, size_t end) {
      uint64_t count = 0;
      for (size_t v = begin; v < end; ++v) count += used[v];
      block_base[t] = count;
    });
    uint64_t distinct = 0;
    for (uint64_t& b : block_base) {
      const uint64_t next = distinct + b;
      b = distinct;
      distinct = next;
    }
    std::vector<VertexId> new_id(n);
    ParallelRanges(n, threads, [&](int t, size_t begin, size_t end) {
      uint64_t next = block_base[t];
      for (size_t v = begin; v < end; ++v) {
        new_id[v] = static_cast<VertexId>(next);
        next += used[v];
      }
    });
    Free(used);
    ParallelRanges(m, threads, [&](int, size_t begin, size_t end) {
      for (size_t e = begin; e < end; ++e) {
        src[e] = new_id[src[e]];
        dst[e] = new_id[dst[e]];
      }
    });
    edges.num_vertices = distinct;
  } else {
    // Sparse (ids spread over a range much larger than the arc count): sort
    // the distinct ids and binary-search them.
    std::vector<VertexId> ids;
    ids.reserve(2 * m);
    ids.insert(ids.end(), edges.src.begin(), edges.src.end());
    ids.insert(ids.end(), edges.dst.begin(), edges.dst.end());
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    ParallelRanges(m, threads, [&](int, size_t begin, size_t end) {
      for (size_t e = begin; e < end; ++e) {
        src[e] = static_cast<VertexId>(
            std::lower_bound(ids.begin(), ids.end(), src[e]) - ids.begin());
        dst[e] = static_cast<VertexId>(
            std::lower_bound(ids.begin(), ids.end(), dst[e]) - ids.begin());
      }
    });
    edges.num_vertices = ids.size();
  }
}

// Sorts each list slots[offsets[v], offsets[v + 1]) unless already sorted and,
// when `dedupe`, keeps its first slot per id. Returns the kept count of v in
// kept[v + 1] (kept[0] = 0).
template <typename T>
std::vector<EdgeIndex> SortAndDedupe(const std::vector<EdgeIndex>& offsets,
                                     std::vector<T>& slots, bool dedupe,
                                     int threads) {
  std::vector<EdgeIndex> kept(offsets.size(), 0);
  ForEachPart(BalancedBounds(offsets, threads),
              [&](int, uint64_t vb, uint64_t ve) {
                for (uint64_t v = vb; v < ve; ++v) {
                  T* const first = slots.data() + offsets[v];
                  T* const last = slots.data() + offsets[v + 1];
                  if (!std::is_sorted(first, last)) std::sort(first, last);
                  if (!dedupe || first == last) {
                    kept[v + 1] = last - first;
                    continue;
                  }
                  T* out = first + 1;
                  for (T* p = first + 1; p != last; ++p) {
                    if (SlotId(*p) != SlotId(*(out - 1))) *out++ = *p;
                  }
                  kept[v + 1] = out - first;
                }
              });
  return kept;
}

// Builds `csr` from the first kept[v + 1] slots of each list of (offsets,
// slots); frees slots.
template <typename T>
void Compact(const std::vector<EdgeIndex>& offsets, std::vector<T>& slots,
             std::vector<EdgeIndex> kept, int threads, Csr& csr) {
  PrefixSum(kept, threads);
  csr.num_vertices = offsets.size() - 1;
  const EdgeIndex total = kept.back();
  if constexpr (std::is_same_v<T, VertexId>) {
    if (total == slots.size()) {
      csr.targets = std::move(slots);
      csr.weights.clear();
      csr.offsets = std::move(kept);
      return;
    }
  }
  csr.targets.resize(total);
  if constexpr (std::is_same_v<T, Key>) {
    csr.weights.resize(total);
  } else {
    csr.weights.clear();
  }
  ForEachPart(BalancedBounds(kept, threads),
              [&](int, uint64_t vb, uint64_t ve) {
                for (uint64_t v = vb; v < ve; ++v) {
                  const T* in = slots.data() + offsets[v];
                  for (EdgeIndex i = kept[v]; i < kept[v + 1]; ++i, ++in) {
                    csr.targets[i] = SlotId(*in);
                    if constexpr (std::is_same_v<T, Key>)
                      csr.weights[i] = SlotWeight(*in);
                  }
                }
              });
  Free(slots);
  csr.offsets = std::move(kept);
}

// Steps 3-6. Frees the edge list's arrays. Returns the parallel arcs removed.
template <typename T>
uint64_t BuildCsrs(EdgeList& edges, const CleanOptions& options,
                   bool symmetrize, int threads, StepTimer& timer, Graph& g) {
  const uint64_t n = edges.num_vertices;
  const uint64_t m = edges.src.size();

  // Step 3: group by target; the slot holds the source.
  std::vector<EdgeIndex> by_target_offsets;
  std::vector<T> by_target;
  {
    const VertexId* const src = edges.src.data();
    const VertexId* const dst = edges.dst.data();
    const Weight* const weight = edges.weights.data();
    const bool drop_loops = options.drop_self_loops;
    CountingSort<T>(
        n, EvenBounds(m, threads), symmetrize ? 2 * m : m, threads,
        [&](uint64_t begin, uint64_t end, auto&& sink) {
          for (uint64_t e = begin; e < end; ++e) {
            const VertexId u = src[e], v = dst[e];
            Weight w = 0;
            if constexpr (std::is_same_v<T, Key>) w = weight[e];
            if (u == v) {
              if (!drop_loops) sink(v, MakeSlot<T>(u, w));
              continue;
            }
            sink(v, MakeSlot<T>(u, w));
            if (symmetrize) sink(u, MakeSlot<T>(v, w));
          }
        },
        by_target_offsets, by_target);
  }
  Free(edges.src);
  Free(edges.dst);
  Free(edges.weights);
  timer.Step("group by target");

  // Step 4: group by source, visiting targets in increasing order.
  std::vector<EdgeIndex> offsets;
  std::vector<T> slots;
  const uint64_t total = by_target.size();
  CountingSort<T>(
      n, BalancedBounds(by_target_offsets, threads), total, threads,
      [&](uint64_t begin, uint64_t end, auto&& sink) {
        for (uint64_t v = begin; v < end; ++v) {
          for (EdgeIndex i = by_target_offsets[v]; i < by_target_offsets[v + 1];
               ++i) {
            const T s = by_target[i];
            sink(SlotId(s),
                 MakeSlot<T>(static_cast<VertexId>(v), SlotWeight(s)));
          }
        }
      },
      offsets, slots);
  Free(by_target);
  Free(by_target_offsets);
  timer.Step("group by source");

  // Step 5.
  std::vector<EdgeIndex> kept =
      SortAndDedupe(offsets, slots, options.drop_parallel_arcs, threads);
  Compact(offsets, slots, std::move(kept), threads, g.out);
  Free(offsets);
  timer.Step("drop parallel arcs, compact");

  // Step 6.
  if (symmetrize) {
    g.in = g.out;  // a symmetric arc set (weights too) is its own transpose
  } else {
    const Csr& out = g.out;
    std::vector<EdgeIndex> in_offsets;
    std::vector<T> in_slots;
    CountingSort<T>(
        n, BalancedBounds(out.offsets, threads), out.num_arcs(), threads,
        [&](uint64_t begin, uint64_t end, auto&& sink) {
          for (uint64_t u = begin; u < end; ++u) {
            for (EdgeIndex i = out.offsets[u]; i < out.offsets[u + 1]; ++i) {
              Weight w = 0;
              if constexpr (std::is_same_v<T, Key>) w = out.weights[i];
              sink(out.targets[i], MakeSlot<T>(static_cast<VertexId>(u), w));
            }
          }
        },
        in_offsets, in_slots);
    // Sorted already unless the atomic fallback ran.
    kept = SortAndDedupe(in_offsets, in_slots, /*dedupe=*/false, threads);
    Compact(in_offsets, in_slots, std::move(kept), threads, g.in);
  }
  timer.Step("in-CSR");
  return total - g.out.num_arcs();
}

}  // namespace

absl::StatusOr<Graph> BuildGraph(EdgeList edges, const CleanOptions& options,
                                 int threads) {
  if (threads <= 0) threads = DefaultThreads();
  StepTimer timer;
  const size_t m = edges.src.size();
  if (edges.dst.size() != m) {
    return absl::InvalidArgumentError(
        absl::StrCat("edge list has ", m, " sources but ", edges.dst.size(),
                     " destinations"));
  }
  if (edges.weighted() && edges.weights.size() != m) {
    return absl::InvalidArgumentError(absl::StrCat(
        "edge list has ", m, " arcs but ", edges.weights.size(), " weights"));
  }
  if (edges.num_vertices > kMaxVertexId + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "edge list has ", edges.num_vertices, " vertices; at most ",
        kMaxVertexId + 1, " are supported"));
  }
  const ArcScan scan = ScanArcs(edges, threads);
  if (m > 0 && scan.max_id >= edges.num_vertices) {
    return OutOfRangeError(edges);
  }

  Graph g;
  g.report.input_arcs = m;
  g.report.vertices_before_relabel = edges.num_vertices;
  if (options.relabel) Relabel(edges, threads);
  timer.Step("validate, relabel");

  const bool symmetrize = options.symmetrize || edges.undirected;
  g.report.self_loops_removed = options.drop_self_loops ? scan.self_loops : 0;
  g.report.arcs_added_by_symmetrize = symmetrize ? m - scan.self_loops : 0;
  g.report.parallel_arcs_removed =
      edges.weighted()
          ? BuildCsrs<Key>(edges, options, symmetrize, threads, timer, g)
          : BuildCsrs<VertexId>(edges, options, symmetrize, threads, timer, g);
  VLOG(1) << "BuildGraph: " << g.report.input_arcs << " input arcs, "
          << g.report.self_loops_removed << " self-loops removed, "
          << g.report.arcs_added_by_symmetrize << " added by symmetrize, "
          << g.report.parallel_arcs_removed << " parallel removed -> "
          << g.num_vertices() << " vertices, " << g.num_arcs() << " arcs";
  return g;
}

}  // namespace dmg::store
