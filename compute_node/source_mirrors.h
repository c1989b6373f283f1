// The engine's side of source mirrors (source_mirror.h has the layout and
// why): who reads what, which arrays are mirrored, where each owner's
// packed copies are, and whether one holds the values a reader needs now.
// Everything travels in the collective headers, as items after the changed
// lines (nothing when there is nothing to say):
//   needs    once per stored direction, when a node's sources are complete:
//            its bit per vertex (every node builds every layout from them);
//   want     once per array, from a node whose pull READ the array's pending
//            lines in a batch filtered by its sources;
//   unwant   once per array, from a node that READ lines its copies had
//            brought (they only added bytes there: Drop);
//   region   once per wanted array, from an owner that holds it resident:
//            its two packed copies (by superstep parity);
//   written  the owner wrote this post's values of the array into the copy
//            of the next superstep's parity, before posting.
// A reader in superstep t uses owner k's copy (parity t % 2) only if k's
// last post with changes to the array came in superstep t - 1 and wrote it:
// k writes that parity again no earlier than superstep t + 1, after every
// node has posted in t (the pull's READ comes before its post). Otherwise
// it READs the lines, as without mirrors. Remote atomics change values no
// post announces: they void every copy of their array (Invalidate).
#ifndef DMG_COMPUTE_NODE_SOURCE_MIRRORS_H_
#define DMG_COMPUTE_NODE_SOURCE_MIRRORS_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "compute_node/source_mirror.h"
#include "compute_node/state_array.h"
#include "transport/transport.h"

namespace dmg::compute {

class SourceMirrors {
 public:
  SourceMirrors(transport::Transport& transport, std::vector<uint64_t> bounds,
                int node);
  ~SourceMirrors();
  SourceMirrors(const SourceMirrors&) = delete;
  SourceMirrors& operator=(const SourceMirrors&) = delete;

  // This node's sources of stored direction d are complete: posted once.
  void SetNeeds(int d, const std::vector<uint64_t>& bits);
  // This node READ array `array`'s pending lines filtered by direction d's
  // sources (posted once).
  void Want(size_t array, int d);

  // Appends this node's items to its post. For every array it mirrors and
  // changed in this post (changed[i]), first WRITEs the packed values (at
  // `superstep` + 1's parity) on `ep` and flushes. Allocates the copies of
  // newly wanted arrays it holds resident.
  absl::Status Put(transport::Endpoint& ep, int superstep,
                   std::span<StateArrayBase* const> arrays,
                   const std::vector<bool>& changed, std::string& out);
  // This node READ lines of array `array` that its last packed copies had
  // brought (a later operation touches other vertices there): it stops
  // using copies of the array and says so (unwant); owners stop writing
  // once no node wants them.
  void Drop(size_t array);

  // Takes node k's items (its own included, so every node's view of wants
  // is alike). changed[i]: k's post changed array i.
  absl::Status Take(int k, int superstep, std::string_view& in,
                    const std::vector<bool>& changed);
  // Remote atomics changed array `array`: no copy holds it.
  void Invalidate(size_t array);

  // What a pull of direction d in `superstep` may READ of array `array`
  // from packed copies (nullptr: nothing; READ the lines).
  const MirrorSource* For(size_t array, int d, int superstep);

 private:
  struct Copy {
    int d = -1;
    transport::RegionInfo region[2];
    int written_step = -1;  // superstep of the last post that wrote it
  };
  struct Array {
    MirrorSource source;  // For's answer
    int wanted_d = -1;    // the direction of the first want (all alike)
    uint64_t wanters = 0;  // a bit per node that wants copies (all alike)
    bool want_posted = false;
    int my_want = -1;
    bool dropped = false, unwant_posted = false;
    Copy own;
    bool own_posted = false;
    std::vector<Copy> from;  // per owner
  };
  Array& At(size_t array);
  absl::Status Allocate(Array& a, size_t array, uint64_t elem);
  absl::Status WritePacked(transport::Endpoint& ep, int superstep,
                           StateArrayBase& state, Copy& own);

  transport::Transport& transport_;
  std::vector<uint64_t> bounds_;
  int node_;
  int nodes_;
  std::vector<std::vector<uint64_t>> needs_[2];  // per node
  std::vector<bool> needs_known_[2];
  std::vector<uint64_t> my_needs_[2];
  bool needs_to_post_[2] = {false, false};
  std::optional<MirrorLayout> layout_[2];
  std::deque<Array> arrays_;  // For's answers stay put as it grows
  std::vector<std::byte> scratch_;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_SOURCE_MIRRORS_H_
