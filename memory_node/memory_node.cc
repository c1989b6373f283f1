#include "memory_node/memory_node.h"

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <new>

#include "absl/strings/str_format.h"
#include "common/memory_limits.h"
#include "glog/logging.h"

namespace dmg::memory_node {

using transport::RegionInfo;

MemoryNode::~MemoryNode() {
  if (options_.guard_memory) {
    for (auto& r : regions_) {
      if (r) Guard(*r, true);  // give the pages back readable to free()
    }
  }
}

void MemoryNode::Guard(const Region& r, bool open) {
  if (r.buffer.size() == 0) return;
  size_t len = (r.buffer.size() + AlignedBuffer::kAlignment - 1) /
               AlignedBuffer::kAlignment * AlignedBuffer::kAlignment;
  PCHECK(::mprotect(const_cast<std::byte*>(r.buffer.data()), len,
                    open ? PROT_READ | PROT_WRITE : PROT_NONE) == 0);
}

namespace {

// One-sided copies between region bytes and a client's buffer. Region
// memory is remote memory with RDMA semantics: several clients' READs,
// WRITEs and atomics may touch the same bytes at once, with no order between
// them but what the protocols build on top (a round word or a counter
// written after the body it vouches for, a checksum, a version); a READ may
// see any mix of old and new bytes, and the protocols assume only that an
// aligned 8-byte word is never torn. memcpy gives that in practice, but in
// the C++ model two threads' unsynchronized memcpy of the same bytes is a
// data race, which ThreadSanitizer reports. So in a TSan build the copy is
// made of relaxed atomic accesses (each aligned region word one 8-byte
// atomic, the client's side atomic too when it is aligned alike, bytes at
// unaligned ends): what the protocols assume, no ordering added, and TSan
// still checks everything around it (docs/TESTING.md).
#if defined(__SANITIZE_THREAD__)
void CopyRegionBytes(void* dst_v, const void* src_v, uint64_t n,
                     bool region_is_src) {
  auto* dst = static_cast<unsigned char*>(dst_v);
  auto* src = static_cast<unsigned char*>(const_cast<void*>(src_v));
  auto byte = [&] {
    std::atomic_ref<unsigned char>(*dst).store(
        std::atomic_ref<unsigned char>(*src).load(std::memory_order_relaxed),
        std::memory_order_relaxed);
    ++dst, ++src, --n;
  };
  const unsigned char* region = region_is_src ? src : dst;
  while (n > 0 && reinterpret_cast<uintptr_t>(region) % 8 != 0) {
    byte();
    region = region_is_src ? src : dst;
  }
  const bool both = reinterpret_cast<uintptr_t>(dst) % 8 == 0 &&
                    reinterpret_cast<uintptr_t>(src) % 8 == 0;
  for (; n >= 8; dst += 8, src += 8, n -= 8) {
    uint64_t w;
    if (both || region_is_src) {
      w = std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(src))
              .load(std::memory_order_relaxed);
    } else {
      std::memcpy(&w, src, 8);
    }
    if (both || !region_is_src) {
      std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(dst))
          .store(w, std::memory_order_relaxed);
    } else {
      std::memcpy(dst, &w, 8);
    }
  }
  while (n > 0) byte();
}
#else
void CopyRegionBytes(void* dst, const void* src, uint64_t n, bool) {
  std::memcpy(dst, src, n);
}
#endif
void ReadRegion(void* dst, const std::byte* region, uint64_t n) {
  CopyRegionBytes(dst, region, n, /*region_is_src=*/true);
}
void WriteRegion(std::byte* region, const void* src, uint64_t n) {
  CopyRegionBytes(region, src, n, /*region_is_src=*/false);
}

}  // namespace

absl::StatusOr<AlignedBuffer> MemoryNode::NewBuffer(uint64_t bytes,
                                                    const std::string& name,
                                                    AlignedBuffer::Init init) {
  // What the daemon may still take, the least of MemAvailable and its
  // cgroup's room (read now: other processes and the cgroup's use change),
  // bounds every allocation, with or without --memory_mb: a client asking
  // for more (2^40 bytes, or 4 GiB in a 3 GiB cgroup on a larger host) gets
  // an error reply instead of a daemon that throws while allocating or is
  // OOM-killed while zeroing the pages.
  const MemoryRoom room = ReadMemoryRoom();
  if (room.known() && bytes > room.bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "memory node %d: %d bytes for '%s' are more than the %d bytes this "
        "daemon may still take (the least limit is %s)",
        id(), bytes, name, room.bytes, room.Source()));
  }
  if (options_.capacity_bytes > 0 && bytes > options_.capacity_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "memory node %d: %d bytes for '%s' exceed its %d-byte capacity", id(),
        bytes, name, options_.capacity_bytes));
  }
  try {
    return AlignedBuffer(bytes, init);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("memory node %d: allocating %d bytes for '%s' failed",
                        id(), bytes, name));
  }
}

absl::StatusOr<RegionInfo> MemoryNode::AddRegion(AlignedBuffer buffer,
                                                 const std::string& name) {
  std::unique_lock lock(mu_);
  if (options_.capacity_bytes > 0 &&
      bytes_in_use_ + buffer.size() > options_.capacity_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "memory node %d: %d more bytes for '%s' would exceed its %d-byte "
        "capacity (%d in use)",
        id(), buffer.size(), name, options_.capacity_bytes, bytes_in_use_));
  }
  auto region = std::make_shared<Region>(Region{std::move(buffer), name});
  if (options_.guard_memory) Guard(*region, false);
  bytes_in_use_ += region->buffer.size();
  RegionInfo info{id(), static_cast<uint32_t>(regions_.size()),
                  region->buffer.size(), name};
  regions_.push_back(std::move(region));
  return info;
}

void MemoryNode::AssignNodeId(uint32_t id, std::string_view by) {
  if (id != this->id())
    LOG(INFO) << "memory node " << this->id() << " is now memory node " << id
              << " (as " << by << " says)";
  id_.store(id, std::memory_order_relaxed);
}

absl::Status MemoryNode::LoadStore(store::StoreImage image) {
  return LoadStore(std::move(image).ReleaseBuffer());
}

absl::Status MemoryNode::LoadStore(AlignedBuffer bytes) {
  std::unique_lock lock(mu_);
  uint64_t old = regions_[0] ? regions_[0]->buffer.size() : 0;
  if (options_.capacity_bytes > 0 &&
      bytes_in_use_ - old + bytes.size() > options_.capacity_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "memory node %d: a %d-byte store exceeds its %d-byte capacity", id(),
        bytes.size(), options_.capacity_bytes));
  }
  if (regions_[0] && options_.guard_memory) Guard(*regions_[0], true);
  regions_[0] = std::make_shared<Region>(Region{std::move(bytes), "store"});
  if (options_.guard_memory) Guard(*regions_[0], false);
  bytes_in_use_ = bytes_in_use_ - old + regions_[0]->buffer.size();
  store_generation_.fetch_add(1, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status MemoryNode::ServeCommitStore(uint32_t staging) {
  std::unique_lock lock(mu_);
  if (staging == transport::kStoreRegion || staging >= regions_.size() ||
      regions_[staging] == nullptr) {
    return absl::NotFoundError(absl::StrFormat(
        "memory node %d: no staged store in region %d", id(), staging));
  }
  // The old store's bytes go (the staged ones were counted when allocated).
  if (regions_[0]) {
    if (options_.guard_memory) Guard(*regions_[0], true);
    bytes_in_use_ -= regions_[0]->buffer.size();
  }
  regions_[0] = std::move(regions_[staging]);
  regions_[0]->name = "store";
  store_generation_.fetch_add(1, std::memory_order_release);
  return absl::OkStatus();
}

absl::StatusOr<RegionInfo> MemoryNode::ServeCreateStore(uint64_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("empty store");
  absl::StatusOr<AlignedBuffer> buffer = NewBuffer(bytes, "store");
  if (!buffer.ok()) return buffer.status();
  if (absl::Status s = LoadStore(*std::move(buffer)); !s.ok()) return s;
  return RegionInfo{id(), transport::kStoreRegion, bytes, "store"};
}

absl::StatusOr<std::span<std::byte>> MemoryNode::RegionMemory(uint32_t region) {
  std::shared_lock lock(mu_);
  if (region >= regions_.size() || regions_[region] == nullptr) {
    return absl::NotFoundError(
        absl::StrFormat("memory node %d: unknown region %d", id(), region));
  }
  return regions_[region]->buffer.span();
}

uint64_t MemoryNode::bytes_in_use() const {
  std::shared_lock lock(mu_);
  return bytes_in_use_;
}

absl::StatusOr<std::byte*> MemoryNode::Locate(uint32_t region, uint64_t offset,
                                              uint64_t length,
                                              size_t alignment) {
  // The caller holds mu_ (shared) for the whole operation, so the region
  // cannot be freed or replaced while its bytes are being copied.
  if (region >= regions_.size() || regions_[region] == nullptr) {
    return absl::NotFoundError(
        absl::StrFormat("memory node %d: unknown region %d", id(), region));
  }
  Region& r = *regions_[region];
  if (offset > r.buffer.size() || length > r.buffer.size() - offset) {
    return absl::OutOfRangeError(absl::StrFormat(
        "memory node %d: access [%d, %d) outside region %d '%s' of %d bytes",
        id(), offset, offset + length, region, r.name, r.buffer.size()));
  }
  if (offset % alignment != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "memory node %d: atomic at offset %d of region %d is not 8-byte "
        "aligned",
        id(), offset, region));
  }
  return r.buffer.data() + offset;
}

template <typename Fn>
absl::Status MemoryNode::Access(uint32_t region, uint64_t offset,
                                uint64_t length, size_t alignment, Fn&& fn) {
  std::shared_lock lock(mu_);
  absl::StatusOr<std::byte*> p = Locate(region, offset, length, alignment);
  if (!p.ok()) return p.status();
  if (!options_.guard_memory) {
    fn(*p);
    return absl::OkStatus();
  }
  std::lock_guard g(guard_mu_);
  Guard(*regions_[region], true);
  fn(*p);
  Guard(*regions_[region], false);
  return absl::OkStatus();
}

absl::Status MemoryNode::ServeRead(uint32_t region, uint64_t offset, void* dst,
                                   uint64_t length) {
  absl::Status s = Access(region, offset, length, 1,
                          [&](std::byte* p) { ReadRegion(dst, p, length); });
  if (!s.ok()) return s;
  reads_.fetch_add(1, std::memory_order_relaxed);
  bytes_read_.fetch_add(length, std::memory_order_relaxed);
  return s;
}

template <typename Copy>
absl::Status MemoryNode::ServeRun(std::span<const transport::Op> ops,
                                  std::atomic<uint64_t>& count,
                                  std::atomic<uint64_t>& byte_count,
                                  Copy copy) {
  // One lock and one count for the run: a batch of many small READs (a
  // bottom-up step's prefixes) or WRITEs (a commit's lines, a level's
  // logged claims) would otherwise pay both per operation, on cache lines
  // every worker shares.
  uint64_t bytes = 0;
  size_t done = 0;
  absl::Status status;
  {
    std::shared_lock lock(mu_);
    for (const transport::Op& op : ops) {
      absl::StatusOr<std::byte*> p = Locate(op.region, op.offset, op.length, 1);
      if (!p.ok()) {
        status = p.status();
        break;
      }
      copy(op, *p);
      bytes += op.length;
      ++done;
    }
  }
  count.fetch_add(done, std::memory_order_relaxed);
  byte_count.fetch_add(bytes, std::memory_order_relaxed);
  return status;
}

absl::Status MemoryNode::ServeReads(std::span<const transport::Op> reads) {
  if (options_.guard_memory) return MemoryTarget::ServeReads(reads);
  return ServeRun(reads, reads_, bytes_read_,
                  [](const transport::Op& op, std::byte* p) {
                    ReadRegion(op.local, p, op.length);
                  });
}

absl::Status MemoryNode::ServeWrites(std::span<const transport::Op> writes) {
  if (options_.guard_memory) return MemoryTarget::ServeWrites(writes);
  return ServeRun(writes, writes_, bytes_written_,
                  [](const transport::Op& op, std::byte* p) {
                    WriteRegion(p, op.local, op.length);
                  });
}

absl::Status MemoryNode::ServeWrite(uint32_t region, uint64_t offset,
                                    const void* src, uint64_t length) {
  absl::Status s = Access(region, offset, length, 1,
                          [&](std::byte* p) { WriteRegion(p, src, length); });
  if (!s.ok()) return s;
  writes_.fetch_add(1, std::memory_order_relaxed);
  bytes_written_.fetch_add(length, std::memory_order_relaxed);
  return s;
}

absl::StatusOr<uint64_t> MemoryNode::ServeCompareAndSwap(uint32_t region,
                                                         uint64_t offset,
                                                         uint64_t expected,
                                                         uint64_t desired) {
  absl::Status s = Access(region, offset, 8, 8, [&](std::byte* p) {
    // On failure `expected` receives the prior value; on success it already
    // is the prior value: either way it is what RDMA CAS returns.
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p))
        .compare_exchange_strong(expected, desired, std::memory_order_seq_cst);
  });
  if (!s.ok()) return s;
  CountAtomic();
  return expected;
}

absl::StatusOr<uint64_t> MemoryNode::ServeFetchAndAdd(uint32_t region,
                                                      uint64_t offset,
                                                      uint64_t add) {
  uint64_t old = 0;
  absl::Status s = Access(region, offset, 8, 8, [&](std::byte* p) {
    old = std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p))
              .fetch_add(add, std::memory_order_seq_cst);
  });
  if (!s.ok()) return s;
  CountAtomic();
  return old;
}

void MemoryNode::CountAtomic() {
  atomics_.fetch_add(1, std::memory_order_relaxed);
  bytes_read_.fetch_add(8, std::memory_order_relaxed);
  bytes_written_.fetch_add(8, std::memory_order_relaxed);
}

absl::StatusOr<RegionInfo> MemoryNode::ServeAllocate(uint64_t bytes,
                                                     const std::string& name) {
  if (bytes == 0) {
    return absl::InvalidArgumentError("cannot allocate an empty region");
  }
  absl::StatusOr<AlignedBuffer> buffer = NewBuffer(bytes, name);
  if (!buffer.ok()) return buffer.status();
  return AddRegion(*std::move(buffer), name);
}

absl::StatusOr<RegionInfo> MemoryNode::ServeAllocateFilled(
    uint64_t bytes, const std::string& name,
    const transport::RegionFill& fill) {
  if (fill.width == 0) return ServeAllocate(bytes, name);
  if (bytes == 0) {
    return absl::InvalidArgumentError("cannot allocate an empty region");
  }
  if (absl::Status s = transport::CheckFill(fill, bytes, name); !s.ok()) {
    return s;
  }
  // Filled once here (the pages faulted in by the fill, not by a zeroing
  // and then the client's WRITEs of the same bytes).
  absl::StatusOr<AlignedBuffer> buffer =
      NewBuffer(bytes, name, AlignedBuffer::Init::kUninitialized);
  if (!buffer.ok()) return buffer.status();
  transport::FillBytes(buffer->data(), bytes, fill);
  return AddRegion(*std::move(buffer), name);
}

absl::Status MemoryNode::ServeFree(uint32_t region) {
  std::unique_lock lock(mu_);
  // The store is never freed (a region a client merely named "store" is).
  if (region == transport::kStoreRegion || region >= regions_.size() ||
      regions_[region] == nullptr) {
    return absl::NotFoundError(
        absl::StrFormat("memory node %d: cannot free region %d", id(), region));
  }
  if (options_.guard_memory) Guard(*regions_[region], true);
  bytes_in_use_ -= regions_[region]->buffer.size();
  regions_[region].reset();
  return absl::OkStatus();
}

std::vector<RegionInfo> MemoryNode::ServeList() {
  std::shared_lock lock(mu_);
  std::vector<RegionInfo> out;
  for (uint32_t i = 0; i < regions_.size(); ++i) {
    if (regions_[i]) {
      out.push_back({id(), i, regions_[i]->buffer.size(), regions_[i]->name});
    }
  }
  return out;
}

std::shared_ptr<const AlignedBuffer> MemoryNode::StoreBytes() const {
  return RegionBytes(transport::kStoreRegion, nullptr);
}

std::shared_ptr<const AlignedBuffer> MemoryNode::RegionBytes(
    uint32_t region, std::string* name) const {
  std::shared_lock lock(mu_);
  if (region >= regions_.size() || !regions_[region]) return nullptr;
  const std::shared_ptr<Region>& r = regions_[region];
  if (name != nullptr) *name = r->name;
  return std::shared_ptr<const AlignedBuffer>(r, &r->buffer);
}

ServedStats MemoryNode::served() const {
  return {reads_.load(), writes_.load(), atomics_.load(), bytes_read_.load(),
          bytes_written_.load()};
}

}  // namespace dmg::memory_node
