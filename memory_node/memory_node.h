// A memory node: owns registered regions (the store image as region 0, and
// vertex-state regions that compute nodes allocate), serves bounds-checked
// one-sided operations on them, and answers the control plane. It never
// computes on the graph. In the embedded cluster it is an object in the
// compute process, reached through transport::LocalTransport; as a daemon
// (`dmg memory-node`) the tcp/rdma servers call the same methods.
#ifndef DMG_MEMORY_NODE_MEMORY_NODE_H_
#define DMG_MEMORY_NODE_MEMORY_NODE_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/aligned_buffer.h"
#include "store/store_image.h"
#include "transport/memory_target.h"

namespace dmg::memory_node {

// What this node served, counted on the memory side (independently of the
// compute side's transport::OpStats, so tests can compare the two).
struct ServedStats {
  uint64_t reads = 0, writes = 0, atomics = 0;
  uint64_t bytes_read = 0, bytes_written = 0;
};

class MemoryNode : public transport::MemoryTarget {
 public:
  struct Options {
    // Test aid: keep every region mprotect(PROT_NONE) except while this node
    // serves an operation, so any direct pointer access from compute code
    // faults. Serializes all operations; never use outside tests.
    bool guard_memory = false;
    // Most bytes all regions together may hold (0: no limit).
    uint64_t capacity_bytes = 0;
  };

  explicit MemoryNode(uint32_t id) : MemoryNode(id, Options()) {}
  MemoryNode(uint32_t id, Options options) : id_(id), options_(options) {}
  ~MemoryNode() override;
  MemoryNode(const MemoryNode&) = delete;
  MemoryNode& operator=(const MemoryNode&) = delete;

  uint32_t id() const { return id_.load(std::memory_order_relaxed); }
  void AssignNodeId(uint32_t id, std::string_view by) override;

  // Registers the image's bytes as region kStoreRegion ("store"), replacing
  // any store there.
  absl::Status LoadStore(store::StoreImage image);
  absl::Status LoadStore(AlignedBuffer bytes);
  // Registers `buffer` as a new region.
  absl::StatusOr<transport::RegionInfo> AddRegion(AlignedBuffer buffer,
                                                  const std::string& name);

  ServedStats served() const;

  // The store's bytes, kept alive for the caller (a snapshot writing them)
  // even if a load replaces the store meanwhile; null without a store.
  std::shared_ptr<const AlignedBuffer> StoreBytes() const;
  // The same for any region (null if there is none by that id); `name`
  // receives its name.
  std::shared_ptr<const AlignedBuffer> RegionBytes(uint32_t region,
                                                   std::string* name) const;

  // transport::MemoryTarget
  absl::Status ServeRead(uint32_t region, uint64_t offset, void* dst,
                         uint64_t length) override;
  absl::Status ServeReads(std::span<const transport::Op> reads) override;
  absl::Status ServeWrites(std::span<const transport::Op> writes) override;
  absl::Status ServeWrite(uint32_t region, uint64_t offset, const void* src,
                          uint64_t length) override;
  absl::StatusOr<uint64_t> ServeCompareAndSwap(uint32_t region, uint64_t offset,
                                               uint64_t expected,
                                               uint64_t desired) override;
  absl::StatusOr<uint64_t> ServeFetchAndAdd(uint32_t region, uint64_t offset,
                                            uint64_t add) override;
  absl::StatusOr<transport::RegionInfo> ServeAllocateFilled(
      uint64_t bytes, const std::string& name,
      const transport::RegionFill& fill) override;
  absl::StatusOr<transport::RegionInfo> ServeAllocate(
      uint64_t bytes, const std::string& name) override;
  absl::StatusOr<transport::RegionInfo> ServeCreateStore(
      uint64_t bytes) override;
  absl::Status ServeCommitStore(uint32_t staging) override;
  uint64_t store_generation() const override {
    return store_generation_.load(std::memory_order_acquire);
  }
  absl::StatusOr<std::span<std::byte>> RegionMemory(uint32_t region) override;
  uint64_t bytes_in_use() const;
  absl::Status ServeFree(uint32_t region) override;
  std::vector<transport::RegionInfo> ServeList() override;

 private:
  struct Region {
    AlignedBuffer buffer;
    std::string name;
  };
  // Looks up a region and checks [offset, offset+length) lies inside it.
  // Requires mu_ held (shared) until the caller is done with the bytes.
  absl::StatusOr<std::byte*> Locate(uint32_t region, uint64_t offset,
                                    uint64_t length, size_t alignment);
  void Guard(const Region& r, bool open);
  // Runs fn(address) on a located, bounds-checked range with the region
  // table locked (and, in guard mode, the region opened) for its duration.
  template <typename Fn>
  absl::Status Access(uint32_t region, uint64_t offset, uint64_t length,
                      size_t alignment, Fn&& fn);
  // ServeReads / ServeWrites: copy(op, address) for each operation of a
  // run, under one lock, counted once into count and byte_count.
  template <typename Copy>
  absl::Status ServeRun(std::span<const transport::Op> ops,
                        std::atomic<uint64_t>& count,
                        std::atomic<uint64_t>& byte_count, Copy copy);
  void CountAtomic();
  // A buffer for a region (zeroed unless `init` says not), or
  // ResourceExhausted (an error reply) when it cannot fit: over the
  // capacity, over what the machine has available, or refused by the
  // allocator.
  absl::StatusOr<AlignedBuffer> NewBuffer(
      uint64_t bytes, const std::string& name,
      AlignedBuffer::Init init = AlignedBuffer::Init::kZero);

  // The position among the memory nodes; `dmg load` may assign it after
  // the daemon started (messages name it, so it is read where they are).
  std::atomic<uint32_t> id_;
  const Options options_;
  mutable std::shared_mutex mu_;  // guards regions_ (the table, not bytes)
  // Slot kStoreRegion is reserved for the store (null until loaded).
  // (shared so a snapshot can hold the store's bytes while it writes them
  // without holding mu_; a commit meanwhile frees them when it is done.)
  std::vector<std::shared_ptr<Region>> regions_ =
      std::vector<std::shared_ptr<Region>>(1);
  uint64_t bytes_in_use_ = 0;  // guarded by mu_
  // Bumped, with mu_ held exclusively, whenever region 0 changes.
  std::atomic<uint64_t> store_generation_{0};
  std::mutex guard_mu_;  // serializes operations in guard_memory mode

  std::atomic<uint64_t> reads_{0}, writes_{0}, atomics_{0};
  std::atomic<uint64_t> bytes_read_{0}, bytes_written_{0};
};

}  // namespace dmg::memory_node

#endif  // DMG_MEMORY_NODE_MEMORY_NODE_H_
