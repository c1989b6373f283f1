// The job's progress record on memory node 0: the last superstep the job
// completed and the values its program carries from one superstep to the
// next (Engine::Carry: a loop counter, a convergence figure, a frontier),
// so that `dmg run --resume` continues from there on a new compute node.
// State arrays need nothing more: the version after superstep s is whole
// in their buffer s % 2, which superstep s + 1 never writes.
//
// Checkpoint c (the state arrays' version c: every superstep's end, or
// every --checkpoint_interval's with one compute node) ends (Record) after
// the state arrays' commit: the carried scalars go into slot c % 2 of the
// record and each carried frontier into its region c % 2; once those
// WRITEs (and the state's) have taken effect, one compare-and-swap moves
// the record's word from (epoch, c - 1) to (epoch, c): after them in the
// same batch when they all go to the record's memory node, which applies
// a connection's operations in order. The slot also names the superstep
// that checkpoint ended. A crash
// before the CAS leaves s - 1 whole: its slot, frontier regions and state
// buffers are the ones superstep s does not write. A resuming node bumps
// the epoch (TakeOver), so a compute node still running the old attempt
// fails its next CAS and stops instead of writing over the new one.
//
// Record layout (kRecordBytes, region "progress"): u64 magic, u64
// signature (what the job computes), u64 word = epoch << 32 | supersteps,
// then two slots of kSlotBytes: {u32 length, u32 crc32, u64 superstep << 32
// | checkpoint, bytes} (a record of an older build has 0 << 32: the
// superstep is the checkpoint). A frontier region ("progress.frontier.K.B",
// kFrontierHeader + n / 8 bytes): {u64 superstep, u64 members | kBitmap, u32
// crc32, u32 0}, then the members as u32 ids, or as a bitmap when that is
// smaller.
#ifndef DMG_COMPUTE_NODE_PROGRESS_H_
#define DMG_COMPUTE_NODE_PROGRESS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute_node/frontier.h"
#include "transport/transport.h"

namespace dmg::compute {

class Progress {
 public:
  static constexpr uint64_t kMagic = 0x31474f5250474d44;  // "DMGPROG1"
  static constexpr uint64_t kRecordBytes = 4096;
  static constexpr uint64_t kSlotAt = 64;
  static constexpr uint64_t kSlotBytes = (kRecordBytes - kSlotAt) / 2;
  static constexpr uint64_t kSlotHeader = 16;
  // Carried scalars of all a program's values together, at most.
  static constexpr uint64_t kMaxScalarBytes = kSlotBytes - kSlotHeader;
  static constexpr uint64_t kFrontierHeader = 24;
  static constexpr uint64_t kBitmap = uint64_t{1} << 63;

  // A value the program carries: `bytes` bytes at `data`, or a frontier.
  struct Carried {
    std::string name;
    void* data = nullptr;
    size_t bytes = 0;
    Frontier* frontier = nullptr;
  };

  // Regions of an earlier attempt of the job, by name, are reused (the
  // caller lists them); the rest are allocated on memory node 0. `record`
  // names the record region (its frontiers' are `record`.frontier.K.B):
  // each compute node of a job of several keeps its own.
  Progress(transport::Transport& transport, uint64_t num_vertices,
           std::string job, std::string record = "progress")
      : transport_(transport),
        n_(num_vertices),
        job_(std::move(job)),
        name_(std::move(record)) {}
  ~Progress();  // frees the record and frontier regions unless Abandon()ed
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Where an earlier attempt left its record: the job's regions on memory
  // node 0 (the progress ones are taken from `regions` and erased there).
  void Adopt(std::vector<transport::RegionInfo>& regions);

  // A fresh start: supersteps 0, epoch 1, for `carried` (kept by
  // pointer; they must outlive this).
  absl::Status Start(transport::Endpoint& ep, uint64_t signature,
                     std::vector<Carried> carried);
  // The last superstep an earlier attempt completed (0: none, or no
  // record); its record must be of `signature`. Changes nothing.
  absl::StatusOr<int> Completed(transport::Endpoint& ep, uint64_t signature);
  // Resumes an earlier attempt: checks its record is of `signature`, takes
  // the job over (epoch + 1) and restores every carried value as it was at
  // the end of `superstep` (-1: the last complete one; else that one or
  // the one before it, when another compute node of the job got no
  // further), whose number it returns (0: none; nothing restored, Start
  // instead).
  absl::StatusOr<int> TakeOver(transport::Endpoint& ep, uint64_t signature,
                               std::vector<Carried> carried,
                               int superstep = -1);
  // Superstep `superstep` (1-based) is complete and is checkpoint
  // `checkpoint` (1-based: the state arrays' version; the same number when
  // every superstep is one, and when `superstep` is left out): records the
  // carried values and moves the word. Aborted when another node took the
  // job over.
  absl::Status Record(transport::Endpoint& ep, int checkpoint,
                      int superstep = -1) {
    Stage(ep, checkpoint, superstep);
    return Seal(ep);
  }
  // Record in two halves, so that the carried values' WRITEs can go out
  // with the state arrays' commit on the same endpoint: Stage queues them
  // on `ep` (nothing waits); Seal moves the word once every WRITE of the
  // checkpoint has completed (the caller's too) or, when those still queued
  // on `ep` go to the record's memory node, in one batch after them (the
  // node applies them in order: a checkpoint then costs one round trip).
  void Stage(transport::Endpoint& ep, int checkpoint, int superstep = -1);
  absl::Status Seal(transport::Endpoint& ep);
  // After TakeOver: the superstep its checkpoint ended.
  int resumed_superstep() const { return resumed_superstep_; }

  bool started() const { return started_; }
  // No more Records (the program's carried values are gone).
  void Stop() { started_ = false; }
  uint32_t epoch() const { return epoch_; }
  // After a transport failure: leave the regions to the memory node.
  void Abandon() { abandoned_ = true; }

 private:
  uint64_t FrontierRegionBytes() const {
    return kFrontierHeader + ((n_ + 63) / 64) * 8;
  }
  absl::StatusOr<transport::RegionInfo> Region(const std::string& name,
                                               uint64_t bytes);
  std::string FrontierName(size_t k, int b) const;
  // The earlier attempt's record among found_ (end(): none).
  std::vector<transport::RegionInfo>::iterator FoundRecord();
  // READs the earlier attempt's record into `record` and checks its magic
  // and signature; `record` is left empty when it was never written.
  absl::Status ReadRecord(transport::Endpoint& ep,
                          const transport::RegionInfo& r, uint64_t signature,
                          std::vector<std::byte>& record);
  absl::Status CheckCarried() const;
  // The two regions of each carried frontier (reused, or allocated), in
  // the order of carried_, into frontier_regions_.
  absl::Status FrontierRegions();
  absl::Status RestoreFrontier(transport::Endpoint& ep, const Carried& c,
                               const transport::RegionInfo& r, int superstep);

  transport::Transport& transport_;
  const uint64_t n_;
  const std::string job_;
  const std::string name_;
  std::vector<transport::RegionInfo> found_;  // an earlier attempt's
  transport::RegionInfo record_;
  std::vector<Carried> carried_;
  // Per carried frontier (in carried_ order): its regions by parity.
  std::vector<std::array<transport::RegionInfo, 2>> frontier_regions_;
  std::vector<transport::RegionInfo> allocated_;  // freed at destruction
  std::vector<std::byte> scratch_;
  bool started_ = false, abandoned_ = false;
  uint32_t epoch_ = 0;
  uint64_t word_ = 0;  // the record's word as this node last set it
  int resumed_superstep_ = 0;
  // What Stage queued (the WRITEs read these until Seal's flush), and the
  // word Seal moves to (0: nothing staged).
  std::vector<std::byte> staged_slot_;
  std::vector<std::vector<std::byte>> staged_frontiers_;
  uint64_t staged_word_ = 0;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_PROGRESS_H_
