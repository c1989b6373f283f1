#include "compute_node/unit_scheduler.h"

namespace dmg::compute {

std::vector<Unit> MakeUnits(std::span<const store::DirectoryEntry> dir,
                            std::span<const uint32_t> entries,
                            uint64_t batch_bytes) {
  std::vector<Unit> units;
  uint64_t bytes = 0;
  for (uint32_t i : entries) {
    const bool adjacent = !units.empty() && units.back().last == i;
    // i continues a split run: all pieces of one vertex stay in one unit.
    const bool continues_run = adjacent &&
                               (dir[i].flags & store::kEntryFlagSplitPiece) &&
                               dir[i - 1].first_vertex == dir[i].first_vertex;
    if (!adjacent || (bytes + dir[i].length > batch_bytes && !continues_run)) {
      units.push_back({i, i + 1});
      bytes = dir[i].length;
    } else {
      units.back().last = i + 1;
      bytes += dir[i].length;
    }
  }
  return units;
}

std::vector<Unit> MakeSparseUnits(std::span<const store::DirectoryEntry> dir,
                                  std::span<const uint32_t> entries,
                                  std::span<const uint64_t> need,
                                  uint64_t unit_bytes) {
  std::vector<Unit> units;
  uint64_t bytes = 0;
  for (size_t k = 0; k < entries.size(); ++k) {
    const uint32_t i = entries[k];
    const bool continues_run = !units.empty() && units.back().last == i &&
                               (dir[i].flags & store::kEntryFlagSplitPiece) &&
                               dir[i - 1].first_vertex == dir[i].first_vertex;
    if (units.empty() || (bytes + need[k] > unit_bytes && !continues_run)) {
      units.push_back({i, i + 1});
      bytes = need[k];
    } else {
      units.back().last = i + 1;  // across untouched entries too
      bytes += need[k];
    }
  }
  return units;
}

std::vector<Unit> MakeAllUnits(std::span<const store::DirectoryEntry> dir,
                               uint64_t batch_bytes) {
  std::vector<uint32_t> all(dir.size());
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = i;
  return MakeUnits(dir, all, batch_bytes);
}

absl::Status UnitScheduler::Run(
    size_t count, const std::function<absl::Status(int, Cursor&)>& task) {
  std::atomic<size_t> next{0};
  return pool_.Run([&](int w) {
    Cursor cursor(&next, count);
    return task(w, cursor);
  });
}

absl::Status UnitScheduler::ForEach(
    size_t count, const std::function<absl::Status(int, size_t)>& fn) {
  // One item: the caller runs it as worker 0 and the pool stays asleep (a
  // hand-off to the workers costs more than a small superstep's work).
  if (count <= 1) return count == 0 ? absl::OkStatus() : fn(0, 0);
  return Run(count, [&](int w, Cursor& cursor) -> absl::Status {
    for (std::optional<size_t> i = cursor.Next(); i; i = cursor.Next()) {
      if (absl::Status s = fn(w, *i); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
}

absl::Status UnitScheduler::ForRanges(
    uint64_t n, uint64_t grain,
    const std::function<absl::Status(int, uint64_t, uint64_t)>& fn) {
  if (grain == 0) grain = 1;
  const uint64_t chunks = n / grain + (n % grain != 0);  // no overflow
  return ForEach(chunks, [&](int w, size_t chunk) {
    uint64_t begin = chunk * grain;
    return fn(w, begin, begin + std::min(grain, n - begin));
  });
}

}  // namespace dmg::compute
