// The TCP wire protocol between compute nodes (and `dmg load`) and memory
// nodes: the control plane for every transport, and the data plane of the tcp
// transport. Little-endian, length-prefixed frames:
//
//   FrameHeader (16 bytes) | payload (length bytes)
//
// A request's reply carries the same request id and type | kReplyBit; a
// failed request is answered with kReplyBit | kErrorBit and an ErrorPayload.
// Every length is checked before anything is allocated: against
// kMaxHandshakePayload until the connection is authenticated, against
// kMaxControlPayload for control requests and kMaxPayload for batches.
//
// A connection starts with kHello (and, when the memory node holds a
// secret, kAuth: the challenge-response of transport/auth.h); the memory
// node answers nothing else before that.
#ifndef DMG_TRANSPORT_WIRE_H_
#define DMG_TRANSPORT_WIRE_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/transport.h"

namespace dmg::transport::wire {

inline constexpr uint32_t kMagic = 0x57474d44;  // "DMGW"
// 2: hello binds a role and a job, and kAuth proves them.
// 3: a job's kAuth also carries its sealed job token (transport/auth.h).
inline constexpr uint32_t kProtocolVersion = 3;
inline constexpr uint32_t kMaxPayload = 256u << 20;
inline constexpr uint32_t kMaxControlPayload = 64u << 10;
inline constexpr uint32_t kMaxHandshakePayload = 1024;
inline constexpr uint32_t kMaxJobName = 200;
inline constexpr uint32_t kMaxOpsPerBatch = 1 << 16;

enum MessageType : uint16_t {
  // {u32 version, u8 role, string job, 16-byte client nonce} ->
  // {u32 version, u32 node_id, u8 auth_required, 16-byte server nonce,
  //  u32 idle_timeout_ms: silent this long, the connection is closed (0:
  //  never); a client keeps the ones it needs alive with kPing}
  kHello = 1,
  kListRegions = 2,  // {} -> RegionList
  // {u64 bytes, string name[, u32 fill width, u64 fill pattern]} ->
  // RegionEntry (the fill: RegionFill; without it the region is zeros)
  kAllocate = 3,
  kFree = 4,   // {u32 region} -> {}
  kBatch = 5,  // BatchRequest -> BatchReply
  // {u64 bytes, u32 node_id, u64 load_id} -> RegionEntry of a staging
  // region: the loader WRITEs it, then kCommitStore makes it the store; if
  // the loader's connection closes first, it is freed and the old store
  // keeps serving.
  kCreateStore = 6,
  kShutdown = 7,  // {} -> {}  (the daemon stops after replying)
  // {32-byte client proof[, 32-byte sealed job token: role job]} ->
  // {32-byte server proof}
  kAuth = 8,
  // {} -> {kRdmaTicketBytes}: admits one RDMA QP (rdma_cm private data)
  kRdmaTicket = 9,
  // {u8 flags (kCommitForce, kCommitCheckOnly)} -> {u64 generation}: the
  // connection's staged store replaces the store, refused while a job holds
  // the current one unless forced (the job then fails, never reads a mix).
  kCommitStore = 10,
  // {} -> {u64 generation, u64 load_id, u64 restored_snapshot} of the store
  // this connection's job started on (Aborted when it was replaced since);
  // restored_snapshot: the snapshot it came from at a restart (0: a load's).
  kStoreInfo = 11,
  // {u32 keep_s} -> {u32 granted_s, u32 others}: a job's regions outlive
  // its connections for granted_s seconds (capped by the node; 0: freed at
  // close again), so `dmg run --resume` finds its state; the job's next
  // connection adopts them. `others`: the job's connections older than
  // this one still open (another compute node still running it).
  kKeepJob = 12,
  // {u8 flags (kSnapshotJobs)} -> SnapshotSummary: the admin asks the node
  // to write a snapshot now (`--snapshot_dir`), with the state of the jobs
  // it keeps for --resume when kSnapshotJobs; the reply comes once the
  // snapshot is in place.
  kSnapshot = 13,
  // {} -> {}: keeps an idle connection open (kHello's idle_timeout_ms).
  kPing = 14,
};
inline constexpr uint8_t kSnapshotJobs = 1;
inline constexpr uint8_t kCommitForce = 1;
inline constexpr uint8_t kCommitCheckOnly = 2;
inline constexpr size_t kRdmaTicketBytes = 16;
inline constexpr uint16_t kReplyBit = 0x8000;
inline constexpr uint16_t kErrorBit = 0x4000;

struct FrameHeader {
  uint32_t magic;
  uint16_t type;
  uint16_t reserved;
  uint32_t length;
  uint32_t request_id;
};
static_assert(sizeof(FrameHeader) == 16);

// One operation of a batch; WRITE payloads follow all op records, in order.
struct WireOp {
  uint8_t kind;  // OpKind
  uint8_t reserved[3];
  uint32_t region;
  uint64_t offset;
  uint32_t length;
  uint32_t reserved2;
  uint64_t compare;
  uint64_t operand;
};
static_assert(sizeof(WireOp) == 40);

// Batch reply: {u32 status code, u32 failed op index, string message}, then,
// if OK, READ payloads and 8-byte atomic results in op order.

// Appends little-endian values to a byte string.
class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  template <typename T>
  void Put(const T& v) {
    out_->append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  void PutBytes(const void* p, size_t n) {
    out_->append(static_cast<const char*>(p), n);
  }
  void PutString(const std::string& s) {
    Put<uint16_t>(static_cast<uint16_t>(std::min<size_t>(s.size(), 65535)));
    out_->append(s.data(), std::min<size_t>(s.size(), 65535));
  }

 private:
  std::string* out_;
};

// Reads values back, failing (not crashing) on truncated input.
class Reader {
 public:
  Reader(const char* data, size_t size) : p_(data), end_(data + size) {}
  template <typename T>
  bool Get(T* v) {
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) return false;
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  bool GetString(std::string* s) {
    uint16_t n;
    if (!Get(&n) || static_cast<size_t>(end_ - p_) < n) return false;
    s->assign(p_, n);
    p_ += n;
    return true;
  }
  const char* Take(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return nullptr;
    const char* at = p_;
    p_ += n;
    return at;
  }
  size_t remaining() const { return end_ - p_; }

 private:
  const char* p_;
  const char* end_;
};

inline void PutRegion(Writer& w, const RegionInfo& r) {
  w.Put(r.id);
  w.Put(r.length);
  w.Put(r.remote_addr);
  w.Put(r.rkey);
  w.PutString(r.name);
}

inline bool GetRegion(Reader& r, uint32_t node, RegionInfo* out) {
  out->node = node;
  return r.Get(&out->id) && r.Get(&out->length) && r.Get(&out->remote_addr) &&
         r.Get(&out->rkey) && r.GetString(&out->name);
}

// kSnapshot's reply: what the snapshot now in place holds.
struct SnapshotSummary {
  uint64_t seq = 0;  // its number in the node's snapshot folder
  uint64_t store_bytes = 0;
  uint32_t jobs = 0, regions = 0;  // job state in it
  uint64_t job_bytes = 0;
  uint32_t running = 0;  // jobs left out because they were running
};

inline void PutSnapshotSummary(Writer& w, const SnapshotSummary& s) {
  w.Put(s.seq);
  w.Put(s.store_bytes);
  w.Put(s.jobs);
  w.Put(s.regions);
  w.Put(s.job_bytes);
  w.Put(s.running);
}

inline bool GetSnapshotSummary(Reader& r, SnapshotSummary* s) {
  return r.Get(&s->seq) && r.Get(&s->store_bytes) && r.Get(&s->jobs) &&
         r.Get(&s->regions) && r.Get(&s->job_bytes) && r.Get(&s->running);
}

inline void PutStatus(Writer& w, const absl::Status& s) {
  w.Put(static_cast<uint32_t>(s.code()));
  w.PutString(std::string(s.message()));
}

inline absl::Status GetStatus(Reader& r) {
  uint32_t code;
  std::string message;
  if (!r.Get(&code) || !r.GetString(&message)) {
    return absl::DataLossError("malformed error reply");
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

}  // namespace dmg::transport::wire

#endif  // DMG_TRANSPORT_WIRE_H_
