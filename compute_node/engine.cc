#include "compute_node/engine.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace dmg::compute {

using transport::OpStats;

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(
    transport::Transport& transport, const EngineOptions& options) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError("engine needs at least one thread");
  }
  std::vector<std::unique_ptr<transport::Endpoint>> endpoints;
  for (int i = 0; i < options.threads; ++i) {
    absl::StatusOr<std::unique_ptr<transport::Endpoint>> ep =
        transport.NewEndpoint();
    if (!ep.ok()) return ep.status();
    endpoints.push_back(*std::move(ep));
  }
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<RemoteGraph> graph = RemoteGraph::Open(*endpoints[0]);
  if (!graph.ok()) return graph.status();
  auto engine = std::unique_ptr<Engine>(
      new Engine(transport, *std::move(graph),
                 std::make_unique<WorkerPool>(std::move(endpoints)), options));
  engine->start_ = start;
  if (absl::Status s = engine->Init(); !s.ok()) return s;
  return engine;
}

Engine::Engine(transport::Transport& transport, RemoteGraph graph,
               std::unique_ptr<WorkerPool> pool, const EngineOptions& options)
    : transport_(transport),
      graph_(std::move(graph)),
      pool_(std::move(pool)),
      options_(options),
      buffers_(pool_->size()) {}

Engine::~Engine() {
  if (barrier_.length > 0 && healthy()) {
    absl::Status s = transport_.FreeRegion(barrier_.node, barrier_.id);
    VLOG_IF(1, !s.ok()) << "freeing barrier region: " << s;
  }
}

absl::Status Engine::Init() {
  for (int d = 0; d < 2; ++d) {
    auto dir = static_cast<Direction>(d);
    std::vector<uint32_t> all(graph_.directory(dir).size());
    for (uint32_t i = 0; i < all.size(); ++i) all[i] = i;
    all_units_[d] = MakeUnits(dir, all);
    touched_[d].assign(all.size(), 0);
  }
  absl::StatusOr<transport::RegionInfo> barrier =
      transport_.AllocateRegion(0, 64, "barrier");
  if (!barrier.ok()) return barrier.status();
  barrier_ = *barrier;
  stats_.transport = transport_.name();
  stats_.threads = threads();
  stats_.vertices = num_vertices();
  stats_.arcs = num_arcs();
  stats_.directory_bytes = graph_.directory_bytes();
  return absl::OkStatus();
}

void Engine::AddLocalStateBytes(int64_t bytes) {
  local_state_bytes_ += bytes;
  stats_.local_state_bytes =
      std::max<uint64_t>(stats_.local_state_bytes, local_state_bytes_);
}

void Engine::Register(StateArrayBase* array) { arrays_.push_back(array); }

void Engine::Unregister(StateArrayBase* array) {
  arrays_.erase(std::remove(arrays_.begin(), arrays_.end(), array),
                arrays_.end());
}

std::vector<Engine::Unit> Engine::MakeUnits(
    Direction d, const std::vector<uint32_t>& entries) const {
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  std::vector<Unit> units;
  uint64_t bytes = 0;
  for (size_t k = 0; k < entries.size(); ++k) {
    uint32_t i = entries[k];
    // Start a new unit when this one is full, unless i continues a split run
    // (all pieces of one vertex stay on one worker, in order) or i does not
    // directly follow the unit's last entry.
    bool continues_run = !units.empty() && units.back().last == i &&
                         (dir[i].flags & store::kEntryFlagSplitPiece) &&
                         dir[i - 1].first_vertex == dir[i].first_vertex;
    bool adjacent = !units.empty() && units.back().last == i;
    if (units.empty() || !adjacent ||
        (bytes + dir[i].length > options_.batch_bytes && !continues_run)) {
      units.push_back({i, i + 1});
      bytes = dir[i].length;
    } else {
      units.back().last = i + 1;
      bytes += dir[i].length;
    }
  }
  return units;
}

std::vector<Engine::Unit> Engine::FrontierUnits(Direction d,
                                                const Frontier& frontier) {
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  std::vector<uint8_t>& touched = touched_[static_cast<int>(d)];
  std::span<const VertexId> vs = frontier.vertices();
  ParallelFor(vs.size(), [&](int, uint64_t b, uint64_t e) {
    for (uint64_t k = b; k < e; ++k) {
      auto [first, last] = store::FindBlocks(dir, vs[k]);
      for (size_t i = first; i < last; ++i) {
        std::atomic_ref<uint8_t>(touched[i])
            .store(1, std::memory_order_relaxed);
      }
    }
  });
  std::vector<uint32_t> entries;
  for (uint32_t i = 0; i < touched.size(); ++i) {
    if (touched[i]) {
      entries.push_back(i);
      touched[i] = 0;
    }
  }
  return MakeUnits(d, entries);
}

absl::Status Engine::ScanUnits(
    Direction d, std::span<const Unit> units,
    const std::function<void(int, const BlockView&)>& per_block) {
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  std::atomic<size_t> next{0};
  return pool_->Run([&](int w) -> absl::Status {
    transport::Endpoint& ep = pool_->endpoint(w);
    std::vector<uint64_t>& buffer = buffers_[w];
    std::vector<uint64_t> at;  // byte offset of each block in buffer
    for (size_t u = next.fetch_add(1); u < units.size();
         u = next.fetch_add(1)) {
      const Unit& unit = units[u];
      uint64_t total = 0;
      at.clear();
      for (uint32_t i = unit.first; i < unit.last; ++i) {
        at.push_back(total);
        total += dir[i].length;  // lengths are multiples of 8
      }
      if (buffer.size() * 8 < total) buffer.resize(total / 8);
      auto* base = reinterpret_cast<std::byte*>(buffer.data());
      for (uint32_t i = unit.first; i < unit.last; ++i) {
        RemoteGraph::Location loc = graph_.Locate(d, dir[i]);
        ep.Read(loc.node, loc.region, loc.offset, base + at[i - unit.first],
                dir[i].length);
      }
      if (absl::Status s = ep.Flush(); !s.ok()) return s;
      for (uint32_t i = unit.first; i < unit.last; ++i) {
        absl::StatusOr<BlockView> block =
            BlockView::Parse({base + at[i - unit.first], dir[i].length});
        if (!block.ok()) return block.status();
        if (block->first_vertex() != dir[i].first_vertex ||
            block->vertex_count() != dir[i].vertex_count) {
          return absl::DataLossError(absl::StrFormat(
              "block %d read from memory node %d disagrees with the "
              "directory",
              i, dir[i].memory_node));
        }
        per_block(w, *block);
      }
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<uint32_t>> Engine::Degrees(Direction d) {
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  std::vector<uint32_t> degree(num_vertices(), 0);
  std::span<const Unit> units = all_units_[static_cast<int>(d)];
  std::atomic<size_t> next{0};
  absl::Status s = pool_->Run([&](int w) -> absl::Status {
    transport::Endpoint& ep = pool_->endpoint(w);
    std::vector<uint64_t> buffer;
    std::vector<uint64_t> at;
    for (size_t u = next.fetch_add(1); u < units.size();
         u = next.fetch_add(1)) {
      const Unit& unit = units[u];
      // Only the header and the offsets: 32 + 4 (k + 1) bytes per block.
      uint64_t total = 0;
      at.clear();
      for (uint32_t i = unit.first; i < unit.last; ++i) {
        at.push_back(total);
        total +=
            (sizeof(store::BlockHeader) + 4 * (dir[i].vertex_count + 1) + 7) /
            8 * 8;
      }
      buffer.resize(total / 8);
      auto* base = reinterpret_cast<std::byte*>(buffer.data());
      for (uint32_t i = unit.first; i < unit.last; ++i) {
        RemoteGraph::Location loc = graph_.Locate(d, dir[i]);
        ep.Read(loc.node, loc.region, loc.offset, base + at[i - unit.first],
                sizeof(store::BlockHeader) + 4 * (dir[i].vertex_count + 1));
      }
      if (absl::Status st = ep.Flush(); !st.ok()) return st;
      for (uint32_t i = unit.first; i < unit.last; ++i) {
        const std::byte* p = base + at[i - unit.first];
        store::BlockHeader h;
        std::memcpy(&h, p, sizeof(h));
        if (h.magic != store::kBlockMagic ||
            h.first_vertex != dir[i].first_vertex ||
            h.vertex_count != dir[i].vertex_count) {
          return absl::DataLossError("block header disagrees with directory");
        }
        const auto* off =
            reinterpret_cast<const uint32_t*>(p + sizeof(store::BlockHeader));
        for (uint32_t k = 0; k < h.vertex_count; ++k) {
          // Split pieces of one vertex are on one worker: no race.
          degree[h.first_vertex + k] += off[k + 1] - off[k];
        }
      }
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return degree;
}

void Engine::BeginSuperstep(const char* direction, uint64_t frontier_size) {
  if (superstep_ == 0 && stats_.supersteps.empty()) {
    stats_.setup = pool_->TotalStats();
  }
  step_start_ = std::chrono::steady_clock::now();
  step_base_ = pool_->TotalStats();
  SuperstepStats s;
  s.index = superstep_ + 1;
  s.direction = direction;
  s.frontier = frontier_size;
  stats_.supersteps.push_back(s);
}

absl::Status Engine::EndSuperstep() {
  ++superstep_;
  for (StateArrayBase* a : arrays_) {
    if (absl::Status s = a->Commit(superstep_); !s.ok()) return s;
  }
  // Barrier: count in, then wait until every compute node has (one today).
  constexpr uint64_t kComputeNodes = 1;
  transport::Endpoint& ep = pool_->endpoint(0);
  uint64_t old = 0;
  ep.FetchAndAdd(barrier_.node, barrier_.id, 0, 1, &old);
  if (absl::Status s = ep.Flush(); !s.ok()) {
    failed_ = true;
    return s;
  }
  uint64_t target = kComputeNodes * static_cast<uint64_t>(superstep_);
  uint64_t seen = old + 1;
  while (seen < target) {
    ep.Read(barrier_.node, barrier_.id, 0, &seen, 8);
    if (absl::Status s = ep.Flush(); !s.ok()) {
      failed_ = true;
      return s;
    }
  }
  SuperstepStats& s = stats_.supersteps.back();
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            step_start_)
                  .count();
  s.ops = pool_->TotalStats() - step_base_;
  return absl::OkStatus();
}

void Engine::Finish() {
  stats_.total = pool_->TotalStats();
  if (stats_.supersteps.empty()) stats_.setup = stats_.total;
  stats_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
          .count();
}

}  // namespace dmg::compute
