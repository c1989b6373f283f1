// The GPU's share of a compute node's range (issue 40): stage 1's
// calibration, the cut, and the share's upload from the store's blocks.
// GatherSum (gather.h) runs the share's pulls.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "compute_node/engine.h"
#include "compute_node/gather.h"
#include "compute_node/vertex_ops.h"
#include "workload/gpu_share.h"
#include "workload/partition.h"

namespace dmg::compute {

using store::DirectoryEntry;

namespace {

// The calibration's GPU sample: about this share of the range's cost (at
// least one grain), enough for the kernels' fixed costs to show without
// uploading much that may be dropped.
constexpr double kSampleShare = 0.125;

}  // namespace

void Engine::GpuOff(std::string reason) {
  gpu_.kernels.reset();
  gpu_.calibrating = false;
  stats_.gpu.note = std::move(reason);
}

const std::vector<uint64_t>& Engine::GpuChunkEdges(Direction neighbours) {
  if (gpu_.chunk_edges.empty()) {
    workload::AddEdgesPerChunk(graph_.directory(Stored(neighbours)),
                               num_vertices(), num_arcs(),
                               internal::kVertexGrain, gpu_.chunk_edges);
  }
  return gpu_.chunk_edges;
}

double Engine::GpuRangeCost(Direction neighbours, VertexId begin,
                            VertexId end) {
  const uint64_t grain = internal::kVertexGrain;
  GpuChunkEdges(neighbours);
  double cost = 0;
  for (uint64_t c = begin / grain; c * grain < end; ++c) {
    const uint64_t lo = c * grain,
                   hi = std::min<uint64_t>(num_vertices(), lo + grain);
    const uint64_t a = std::max<uint64_t>(lo, begin);
    const uint64_t b = std::min<uint64_t>(hi, end);
    if (a >= b) continue;
    const double edges =
        c < gpu_.chunk_edges.size() ? double(gpu_.chunk_edges[c]) : 0.0;
    cost += (edges + options_.stage1_alpha * double(hi - lo)) * double(b - a) /
            double(hi - lo);
  }
  return cost;
}

absl::StatusOr<bool> Engine::GpuShareForBottomUp(Direction d) {
  if (!options_.gpu_share || compute_nodes() > 1 || weighted()) return false;
  if (gpu_.kernels == nullptr) {
    if (gpu_.tried || options_.gpu_share_fraction < 0) return false;
    DMG_ASSIGN_OR_RETURN(const GpuPhase phase, GpuShareFor(d, nullptr));
    if (phase != GpuPhase::kRun) return false;
  }
  return gpu_.direction == Stored(d);
}

absl::StatusOr<Engine::GpuPhase> Engine::GpuShareFor(
    Direction neighbours, const SamplePull& sample_pull) {
  if (gpu_.kernels != nullptr) return GpuPhase::kRun;
  if (gpu_.tried) return GpuPhase::kNone;
  gpu_.tried = true;
  stats_.gpu.begin = own_begin_;
  stats_.gpu.end = own_end_;
  GpuChunkEdges(neighbours);
  if (options_.gpu_share_fraction >= 0) {
    stats_.gpu.share = options_.gpu_share_fraction;
    const VertexId cut = static_cast<VertexId>(workload::SplitForGpu(
        gpu_.chunk_edges, num_vertices(), internal::kVertexGrain, own_begin_,
        own_end_, options_.gpu_share_fraction, options_.stage1_alpha));
    DMG_RETURN_IF_ERROR(OpenGpuShare(neighbours, cut));
    if (gpu_.kernels == nullptr) return GpuPhase::kNone;
    stats_.gpu.note = "fixed share (gpu_share_fraction)";
    return GpuPhase::kRun;
  }
  // Stage 1's calibration: the GPU pulls a sample now; this gather runs on
  // the CPU threads, timed (FinishGpuCalibration cuts the range after it).
  VertexId sample = static_cast<VertexId>(workload::SplitForGpu(
      gpu_.chunk_edges, num_vertices(), internal::kVertexGrain, own_begin_,
      own_end_, kSampleShare, options_.stage1_alpha));
  if (sample == own_begin_) {
    sample = static_cast<VertexId>(std::min<uint64_t>(
        own_end_, uint64_t{own_begin_} + internal::kVertexGrain));
  }
  if (sample == own_begin_) {
    GpuOff("the node's range is empty");
    return GpuPhase::kNone;
  }
  absl::StatusOr<std::unique_ptr<gpu::ShareKernels>> k =
      OpenShare(neighbours, own_begin_, sample);
  if (!k.ok()) {
    if (!healthy()) return k.status();  // a transport failure
    GpuOff(absl::StrCat("the GPU share did not open (", k.status().ToString(),
                        "): the CPU threads run it all"));
    return GpuPhase::kNone;
  }
  // The GPU's time from the kernels' own figures (copies and kernels, as
  // timed by the device) when it gives them, else the call's wall time.
  const gpu::KernelTimes before = (*k)->times();
  const auto start = std::chrono::steady_clock::now();
  if (absl::Status s = sample_pull(**k); !s.ok()) {
    GpuOff(absl::StrCat("the GPU's sample pull failed (", s.ToString(),
                        "): the CPU threads run it all"));
    return GpuPhase::kNone;
  }
  const std::chrono::duration<double> wall =
      std::chrono::steady_clock::now() - start;
  const gpu::KernelTimes after = (*k)->times();
  const double timed = (after.kernel_seconds - before.kernel_seconds) +
                       (after.copy_seconds - before.copy_seconds);
  gpu_.sample_seconds = timed > 0 ? timed : wall.count();
  gpu_.sample_units = GpuRangeCost(neighbours, own_begin_, sample);
  gpu_.calibrating = true;
  return GpuPhase::kCalibrate;
}

absl::Status Engine::FinishGpuCalibration(Direction neighbours,
                                          double cpu_seconds) {
  gpu_.calibrating = false;
  workload::Calibration c;
  c.cpu_units = GpuRangeCost(neighbours, own_begin_, own_end_);
  c.cpu_seconds = cpu_seconds;
  c.gpu_units = gpu_.sample_units;
  c.gpu_seconds = gpu_.sample_seconds;
  const workload::GpuShare share = workload::ShareFromCalibration(c);
  GpuStats& g = stats_.gpu;
  g.cpu_units = c.cpu_units;
  g.cpu_seconds = c.cpu_seconds;
  g.gpu_units = c.gpu_units;
  g.gpu_seconds = c.gpu_seconds;
  g.cpu_rate = share.cpu_rate;
  g.gpu_rate = share.gpu_rate;
  g.share = share.share;
  if (share.share <= 0) {
    GpuOff(absl::StrCat("calibrated: ", share.reason,
                        ": the CPU threads run it all"));
    return absl::OkStatus();
  }
  VertexId cut = static_cast<VertexId>(workload::SplitForGpu(
      gpu_.chunk_edges, num_vertices(), internal::kVertexGrain, own_begin_,
      own_end_, share.share, options_.stage1_alpha));
  if (cut >= own_end_) {
    // The CPU threads keep a part (workload::kMaxGpuShare): the nearest cut
    // on coarse grains may be the range's end.
    cut = static_cast<VertexId>(std::max<uint64_t>(
        own_begin_, (uint64_t{own_end_} - 1) / internal::kVertexGrain *
                        internal::kVertexGrain));
  }
  DMG_RETURN_IF_ERROR(OpenGpuShare(neighbours, cut));
  if (gpu_.kernels != nullptr) g.note = "calibrated";
  return absl::OkStatus();
}

absl::Status Engine::OpenGpuShare(Direction neighbours, VertexId cut) {
  stats_.gpu.cut = cut;
  if (cut <= own_begin_) {
    GpuOff("the GPU's share is under one grain: the CPU threads run it all");
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<gpu::ShareKernels>> k =
      OpenShare(neighbours, own_begin_, cut);
  if (!k.ok()) {
    if (!healthy()) return k.status();
    GpuOff(absl::StrCat("the GPU share did not open (", k.status().ToString(),
                        "): the CPU threads run it all"));
    return absl::OkStatus();
  }
  gpu_.kernels = *std::move(k);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<gpu::ShareKernels>> Engine::OpenShare(
    Direction neighbours, VertexId begin, VertexId end) {
  DMG_ASSIGN_OR_RETURN(std::unique_ptr<gpu::ShareKernels> k,
                       options_.gpu_share(num_vertices(), begin, end));
  if (k == nullptr || k->begin() != begin || k->end() != end) {
    return absl::InternalError("the GPU share factory gave another share");
  }
  DMG_RETURN_IF_ERROR(UploadShare(*k, neighbours));
  return k;
}

// The share's offsets come from its blocks' headers (READ, header bytes
// only); its targets are READ as Upload's fill asks for each staging
// chunk: the blocks holding the chunk's edges, each piece copied where its
// edges fall (a block's first_edge is its place in the CSR order). Host
// memory holds the offsets and one batch of blocks, not the share's edges.
absl::Status Engine::UploadShare(gpu::ShareKernels& share, Direction d) {
  d = Stored(d);
  const VertexId begin = static_cast<VertexId>(share.begin());
  const VertexId end = static_cast<VertexId>(share.end());
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  const uint32_t first = store::FindBlocks(dir, begin).first;
  const uint32_t last = store::FindBlocks(dir, end - 1).second;
  const transport::OpStats ops_before = pool_->TotalStats();
  DMG_ASSIGN_OR_RETURN(ShareOffsets o, ReadShareOffsets(d, begin, end));
  stats_.gpu.upload_edges += o.offsets.back();
  const HotBlockCache* hot = hot_[static_cast<int>(d)].get();
  gpu::CsrChunks chunks;
  chunks.offsets = o.offsets;
  chunks.fill = [&](uint64_t from, std::span<uint32_t> out) -> absl::Status {
    const uint64_t to = from + out.size();
    // The share's vertices with edges in [from, to), and their blocks.
    const auto lo = std::upper_bound(o.offsets.begin(), o.offsets.end(), from);
    const auto hi = std::lower_bound(lo, o.offsets.end(), to);
    const VertexId v_lo =
        begin + static_cast<VertexId>(lo - o.offsets.begin() - 1);
    const VertexId v_hi = begin + static_cast<VertexId>(hi - o.offsets.begin());
    const Unit unit{
        std::max(first,
                 static_cast<uint32_t>(store::FindBlocks(dir, v_lo).first)),
        std::min(last, static_cast<uint32_t>(
                           store::FindBlocks(dir, v_hi - 1).second))};
    uint64_t copied = 0;
    auto place = [&](const BlockView& b) {
      const VertexId* block_targets = b.all_targets().data();
      const VertexId a = std::max(b.first_vertex(), v_lo);
      const VertexId z = static_cast<VertexId>(std::min<uint64_t>(
          uint64_t{b.first_vertex()} + b.vertex_count(), v_hi));
      for (VertexId v = a; v < z; ++v) {
        const std::span<const VertexId> t = b.targets(v);
        const uint64_t at =
            b.first_edge() + (t.data() - block_targets) - o.first_edge;
        const uint64_t x = std::max(at, from);
        const uint64_t y = std::min(at + t.size(), to);
        if (x >= y) continue;
        std::memcpy(out.data() + (x - from), t.data() + (x - at),
                    (y - x) * sizeof(uint32_t));
        copied += y - x;
      }
    };
    DMG_RETURN_IF_ERROR(Fail(source_->Read(
        0, d, unit, /*headers_only=*/false,
        [&](uint32_t i, const std::byte* p, uint32_t len) -> absl::Status {
          stats_.supersteps.back().gpu_upload_visits +=
              dir[i].vertex_count + store::EntryEdges(dir, i, num_arcs());
          if (const BlockView* v = hot ? hot->View(i, p) : nullptr) {
            place(*v);
            return absl::OkStatus();
          }
          DMG_ASSIGN_OR_RETURN(BlockView b, ParseBlock(dir, i, p, len));
          place(b);
          return absl::OkStatus();
        })));
    if (copied != out.size()) {
      return Fail(absl::DataLossError(
          absl::StrFormat("GPU share upload: %d of edges [%d, %d) were read",
                          copied, from, to)));
    }
    return absl::OkStatus();
  };
  DMG_RETURN_IF_ERROR(share.Upload(gpu::Direction::kIn, chunks));
  gpu_.direction = d;
  stats_.gpu.upload_bytes_read += (pool_->TotalStats() - ops_before).bytes_read;
  return absl::OkStatus();
}

absl::StatusOr<Engine::ShareOffsets> Engine::ReadShareOffsets(Direction d,
                                                              VertexId begin,
                                                              VertexId end) {
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  const uint32_t first = store::FindBlocks(dir, begin).first;
  const uint32_t last = store::FindBlocks(dir, end - 1).second;
  // Units of about a batch of header bytes, one READ each.
  std::vector<Unit> units;
  uint64_t bytes = 0;
  for (uint32_t i = first, from = first; i < last; ++i) {
    bytes += BlockHeaderLength(dir[i]);
    if (bytes >= buffers_.batch_bytes || i + 1 == last) {
      units.push_back(Unit{from, i + 1});
      from = i + 1;
      bytes = 0;
    }
  }
  ShareOffsets o;
  // Degrees first (a split vertex's pieces may be in two units), then
  // their prefix sums.
  o.offsets.assign(uint64_t{end} - begin + 1, 0);
  DMG_RETURN_IF_ERROR(
      Fail(scheduler_.ForEach(units.size(), [&](int w, size_t u) {
        return source_->Read(
            w, d, units[u], /*headers_only=*/true,
            [&](uint32_t i, const std::byte* p, uint32_t) -> absl::Status {
              DMG_ASSIGN_OR_RETURN(const uint32_t* off,
                                   ParseBlockHeader(dir, i, p));
              const VertexId v0 = dir[i].first_vertex;
              if (i == first)
                o.first_edge = dir[i].first_edge + off[begin - v0];
              const VertexId a = std::max(v0, begin);
              const VertexId z = static_cast<VertexId>(
                  std::min<uint64_t>(uint64_t{v0} + dir[i].vertex_count, end));
              for (VertexId v = a; v < z; ++v) {
                std::atomic_ref<uint64_t>(o.offsets[v - begin + 1])
                    .fetch_add(off[v - v0 + 1] - off[v - v0],
                               std::memory_order_relaxed);
              }
              return absl::OkStatus();
            });
      })));
  for (size_t i = 1; i < o.offsets.size(); ++i)
    o.offsets[i] += o.offsets[i - 1];
  return o;
}

template <typename T>
absl::StatusOr<double> Engine::GatherSumOnGpu(
    Direction neighbours, State<T>& values,
    const std::function<double(VertexId, T)>& finish) {
  return GatherSum(neighbours, values, finish);
}
template absl::StatusOr<double> Engine::GatherSumOnGpu<float>(
    Direction, State<float>&, const std::function<double(VertexId, float)>&);
template absl::StatusOr<double> Engine::GatherSumOnGpu<double>(
    Direction, State<double>&, const std::function<double(VertexId, double)>&);

}  // namespace dmg::compute
