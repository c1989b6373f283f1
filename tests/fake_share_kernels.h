// HostShare: a gpu::ShareKernels that runs the kernel bodies
// (gpu/kernel_bodies.h) on the host the way kernels.cu's warps and
// persistent blocks do. gpu_kernels_test checks it against references;
// engine tests inject it (EngineOptions::gpu_share) where no GPU is, so
// that the engine's GPU path runs everywhere. Header-only: tests include
// it directly.
#ifndef DMG_TESTS_FAKE_SHARE_KERNELS_H_
#define DMG_TESTS_FAKE_SHARE_KERNELS_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gpu/kernel_bodies.h"
#include "gpu/kernels.h"

namespace dmg::gpu::fake {

using bodies::ChunkPlan;
using bodies::kGroup;
using bodies::kWarpFrom;
using Pairs = std::vector<std::pair<uint32_t, uint32_t>>;

struct HostCounters {
  uint32_t Load(uint32_t* p) const { return *p; }
  uint32_t FetchAdd(uint32_t* p) const { return (*p)++; }
};

// Claims on a host copy of a bitmap (the device: atomicOr).
struct BitmapClaim {
  std::vector<uint64_t>* bits;
  bool operator()(uint32_t v) const {
    const uint64_t bit = uint64_t{1} << (v & 63);
    const uint64_t before = (*bits)[v >> 6];
    (*bits)[v >> 6] |= bit;
    return bodies::WonClaim(before, bit);
  }
};

// ---- HostShare: the kernels' structure on the host ---------------------

// A ShareKernels that runs kernel_bodies.h as kernels.cu does: groups of
// kGroup indices, one lane per index, the warp together on lists of
// kWarpFrom or more; kPlain visits the groups (in a random order: the
// device promises none), kNuma lets simulated persistent blocks, one per
// entry of sm_node, take chunks from their nodes' queues in a random
// interleaving. Upload takes the targets through a small staging buffer,
// so the chunked fill is exercised too.
class HostShare final : public ShareKernels {
 public:
  HostShare(uint64_t num_vertices, uint64_t begin, uint64_t end,
            const KernelOptions& options, uint64_t seed)
      : ShareKernels(begin, end),
        n_all_(num_vertices),
        options_(options),
        rng_(seed) {}

  using ShareKernels::Upload;
  absl::Status Upload(Direction direction, const CsrChunks& csr) override {
    Csr& c = csr_[static_cast<int>(direction)];
    if (csr.offsets.size() != end_ - begin_ + 1 || csr.offsets[0] != 0) {
      return absl::InvalidArgumentError("offsets do not fit the share");
    }
    c.offsets.assign(csr.offsets.begin(), csr.offsets.end());
    c.targets.resize(c.offsets.back());
    std::vector<uint32_t> staging(997);
    for (uint64_t first = 0; first < c.targets.size();) {
      const uint64_t len =
          std::min<uint64_t>(staging.size(), c.targets.size() - first);
      if (absl::Status s = csr.fill(first, {staging.data(), len}); !s.ok()) {
        return s;
      }
      std::copy_n(staging.begin(), len, c.targets.begin() + first);
      first += len;
    }
    c.parts = bodies::SplitByEdges(c.offsets, Nodes());
    const uint64_t cost = bodies::CostBefore(c.offsets, end_ - begin_);
    c.plan = bodies::PlanChunks(c.offsets, c.parts,
                                std::max<uint64_t>(kGroup, cost / 64));
    c.loaded = true;
    return absl::OkStatus();
  }

  absl::Status PageRankPull(std::span<const float> contrib_all,
                            std::span<float> sums_share) override {
    return Pull(contrib_all, sums_share);
  }
  absl::Status PageRankPull(std::span<const double> contrib_all,
                            std::span<double> sums_share) override {
    return Pull(contrib_all, sums_share);
  }

  absl::Status BfsBottomUp(std::span<const uint64_t> frontier,
                           std::span<int64_t> parent,
                           uint64_t* awakened) override;
  absl::Status BfsTopDown(std::span<const uint32_t> frontier_in_share,
                          std::span<const uint64_t> visited,
                          Pairs* discovered) override;
  // Fake timings (calibration tests): each pull "takes" seconds_per_edge
  // per edge of the share, reported in times() as kernel time.
  void set_seconds_per_edge(double s) { seconds_per_edge_ = s; }
  KernelTimes times() const override { return times_; }
  uint64_t pulls() const { return times_.launches; }

 private:
  struct Csr {
    std::vector<uint64_t> offsets;
    std::vector<uint32_t> targets;
    std::vector<uint64_t> parts;
    ChunkPlan plan;
    bool loaded = false;
  };

  int Nodes() const {
    return options_.schedule == Schedule::kNuma ? std::max(options_.nodes, 1)
                                                : 1;
  }
  uint64_t Degree(const Csr& c, uint64_t i) const {
    return c.offsets[i + 1] - c.offsets[i];
  }

  // Runs group(g) for every group of `size` indices under the schedule.
  template <typename Group>
  void ForEachGroup(uint64_t size, const ChunkPlan& plan, Group group);

  template <typename T>
  absl::Status Pull(std::span<const T> contrib, std::span<T> sums);

  uint64_t n_all_;
  KernelOptions options_;
  double seconds_per_edge_ = 0;
  KernelTimes times_;
  std::mt19937_64 rng_;
  Csr csr_[2];
};

template <typename Group>
void HostShare::ForEachGroup(uint64_t size, const ChunkPlan& plan,
                             Group group) {
  const uint64_t groups = (size + kGroup - 1) / kGroup;
  if (options_.schedule == Schedule::kPlain) {
    std::vector<uint64_t> order(groups);
    for (uint64_t g = 0; g < groups; ++g) order[g] = g;
    std::shuffle(order.begin(), order.end(), rng_);
    for (uint64_t g : order) group(g);
    return;
  }
  std::vector<uint32_t> counters(Nodes(), 0);
  std::vector<int> homes;
  for (uint32_t sm = 0; sm < std::max<size_t>(options_.sm_node.size(), 1);
       ++sm) {
    homes.push_back(bodies::HomeNode(sm, options_.sm_node.data(),
                                     options_.sm_node.size(), Nodes()));
  }
  HostCounters ops;
  while (!homes.empty()) {
    const size_t b = rng_() % homes.size();
    const int64_t c = bodies::TakeChunk(
        homes[b], Nodes(), plan.node_first.data(), counters.data(), ops);
    if (c < 0) {
      homes.erase(homes.begin() + b);
      continue;
    }
    for (uint64_t g = bodies::FirstGroup(plan.chunk_begin.data(), c);
         g < bodies::EndGroup(plan.chunk_begin.data(), c); ++g) {
      group(g);
    }
  }
}

template <typename T>
inline absl::Status HostShare::Pull(std::span<const T> contrib,
                                    std::span<T> sums) {
  const Csr& c = csr_[static_cast<int>(Direction::kIn)];
  if (!c.loaded || contrib.size() != n_all_ || sums.size() != end_ - begin_) {
    return absl::InvalidArgumentError("pull: no in-edges or sizes wrong");
  }
  auto load = [&](uint32_t u) { return contrib[u]; };
  const uint64_t n = end_ - begin_;
  times_.kernel_seconds += seconds_per_edge_ * c.offsets.back();
  times_.bytes_to_device += contrib.size_bytes();
  times_.bytes_from_device += sums.size_bytes();
  ++times_.launches;
  ForEachGroup(n, c.plan, [&](uint64_t g) {
    for (uint64_t i = g * kGroup; i < std::min(n, (g + 1) * kGroup); ++i) {
      const uint64_t lo = c.offsets[i], hi = c.offsets[i + 1];
      if (hi - lo < kWarpFrom) {
        sums[i] = bodies::PullSum<T>(c.targets.data(), lo, hi, load);
        continue;
      }
      T parts[kGroup];
      for (uint32_t lane = 0; lane < kGroup; ++lane) {
        parts[lane] = bodies::PullLanePart<T>(c.targets.data(), lo, hi, lane,
                                              kGroup, load);
      }
      bodies::WarpTreeSum(parts, kGroup);
      sums[i] = parts[0];
    }
  });
  return absl::OkStatus();
}

inline absl::Status HostShare::BfsBottomUp(std::span<const uint64_t> frontier,
                                           std::span<int64_t> parent,
                                           uint64_t* awakened) {
  const Csr& c = csr_[static_cast<int>(Direction::kIn)];
  if (!c.loaded || frontier.size() != (n_all_ + 63) / 64 ||
      parent.size() != end_ - begin_) {
    return absl::InvalidArgumentError("bottom-up: no in-edges, sizes wrong");
  }
  const uint64_t n = end_ - begin_;
  uint64_t woken = 0;
  ForEachGroup(n, c.plan, [&](uint64_t g) {
    for (uint64_t i = g * kGroup; i < std::min(n, (g + 1) * kGroup); ++i) {
      if (parent[i] >= 0) continue;
      const uint64_t lo = c.offsets[i], hi = c.offsets[i + 1];
      int64_t p = -1;
      if (hi - lo < kWarpFrom) {
        p = bodies::FirstParent(c.targets.data(), lo, hi, frontier.data());
      } else {
        // The warp's windows: the lowest lane that hits, then stop.
        for (uint64_t w = lo; w < hi && p < 0; w += kGroup) {
          for (uint32_t lane = 0; lane < kGroup; ++lane) {
            if (bodies::LaneHit(c.targets.data(), w, hi, lane,
                                frontier.data())) {
              p = c.targets[w + lane];
              break;
            }
          }
        }
      }
      if (p >= 0) {
        parent[i] = p;
        ++woken;
      }
    }
  });
  if (awakened != nullptr) *awakened = woken;
  return absl::OkStatus();
}

inline absl::Status HostShare::BfsTopDown(
    std::span<const uint32_t> frontier_in_share,
    std::span<const uint64_t> visited, Pairs* discovered) {
  const Csr& c = csr_[static_cast<int>(Direction::kOut)];
  if (!c.loaded || visited.size() != (n_all_ + 63) / 64) {
    return absl::InvalidArgumentError("top-down: no out-edges, sizes wrong");
  }
  std::vector<uint32_t> local;
  for (uint32_t u : frontier_in_share) {
    if (u < begin_ || u >= end_) {
      return absl::InvalidArgumentError("frontier vertex outside the share");
    }
    local.push_back(u - begin_);
  }
  std::sort(local.begin(), local.end());
  const ChunkPlan plan = bodies::PlanFrontier(local, c.parts, 64);
  std::vector<uint64_t> claimed(visited.begin(), visited.end());
  BitmapClaim claim{&claimed};
  auto emit = [&](uint32_t v, uint32_t u) { discovered->emplace_back(v, u); };
  ForEachGroup(local.size(), plan, [&](uint64_t g) {
    for (uint64_t j = g * kGroup;
         j < std::min<uint64_t>(local.size(), (g + 1) * kGroup); ++j) {
      const uint64_t i = local[j];
      const uint32_t u = static_cast<uint32_t>(begin_ + i);
      const uint64_t lo = c.offsets[i], hi = c.offsets[i + 1];
      const uint32_t stride = hi - lo < kWarpFrom ? 1 : kGroup;
      for (uint32_t lane = 0; lane < stride; ++lane) {
        bodies::ExpandTopDown(c.targets.data(), lo, hi, lane, stride, u, claim,
                              emit);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace dmg::gpu::fake

#endif  // DMG_TESTS_FAKE_SHARE_KERNELS_H_
