// EdgeMap (vertex_program.h is the API): push and pull on one compute node,
// and with several the exchange of updates to other nodes' vertices, as
// combined batches (FinishPush) or remote atomics (AtomicPush).
#ifndef DMG_COMPUTE_NODE_EDGE_MAP_H_
#define DMG_COMPUTE_NODE_EDGE_MAP_H_

#include <bit>
#include <optional>
#include <span>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "compute_node/engine.h"
#include "compute_node/vertex_ops.h"
#include "compute_node/wire_codec.h"
#include "coordinator/remote_atomics.h"
#include "coordinator/update_batches.h"

namespace dmg::compute {

// The end of a push EdgeMap with several compute nodes: `outbox` holds, per
// worker, the updates made to other nodes' vertices. They are combined per
// target with Op's combine and each owner gets its own in one part of an
// exchange (the batch update mode); owners apply them, and a second
// exchange carries what that changed. `next` holds this node's changes.
template <typename Op, typename T>
std::vector<std::string> Engine::OwnerBatches(uint64_t* sent) {
  std::span<const RemoteUpdate<T>> all =
      CombineOutboxes<Op, T>(std::span<UpdateOutbox>(outbox_), combine_);
  *sent = all.size();
  return coordinator::BatchesByOwner<T>(all, cluster_->bounds());
}

template <typename T>
absl::Status Engine::TakeInbox(const std::vector<Cluster::Received>& got,
                               std::vector<RemoteUpdate<T>>& inbox) {
  std::vector<std::string_view> parts;
  for (const Cluster::Received& r : got) parts.push_back(r.mine);
  return Fail(coordinator::ReadInbox<T>(parts, own_begin_, own_end_,
                                        compute_node(), inbox));
}

template <typename Op, typename T>
absl::StatusOr<std::vector<RemoteUpdate<T>>> Engine::ExchangeUpdates() {
  uint64_t sent = 0;
  std::vector<std::string> to = OwnerBatches<Op, T>(&sent);
  DMG_ASSIGN_OR_RETURN(std::vector<Cluster::Received> got, Collective("", to));
  std::vector<RemoteUpdate<T>> inbox;
  DMG_RETURN_IF_ERROR(TakeInbox<T>(got, inbox));
  return inbox;
}

// Pairs a program computed for other nodes' vertices (Afforest's taken
// units), to their owners as a push's batches travel.
template <typename T>
absl::StatusOr<std::vector<RemoteUpdate<T>>> Engine::SendToOwners(
    std::span<const RemoteUpdate<T>> sorted) {
  if (compute_nodes() == 1) {
    return std::vector<RemoteUpdate<T>>(sorted.begin(), sorted.end());
  }
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i].v < sorted[i - 1].v) {
      return Fail(absl::InvalidArgumentError(
          "SendToOwners: pairs are not ascending by vertex"));
    }
  }
  if (!sorted.empty() && sorted.back().v >= num_vertices()) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "SendToOwners: vertex %d is not in the graph", sorted.back().v)));
  }
  const std::vector<std::string> to =
      coordinator::BatchesByOwner<T>(sorted, cluster_->bounds());
  DMG_ASSIGN_OR_RETURN(std::vector<Cluster::Received> got, Collective("", to));
  std::vector<RemoteUpdate<T>> inbox;
  DMG_RETURN_IF_ERROR(TakeInbox<T>(got, inbox));
  return inbox;
}

template <typename Op, typename T>
absl::StatusOr<Frontier> Engine::FinishPush(State<T>& target, Frontier next) {
  using Update = RemoteUpdate<T>;
  uint64_t updates = 0;
  std::vector<std::string> to = OwnerBatches<Op, T>(&updates);
  const bool any = updates > 0;
  MessageWriter out;
  out.Put<uint8_t>(any ? 1 : 0);
  PutFrontier(out, next, nullptr, /*may_count=*/true);
  // When updates travel, nobody reads another node's state until the
  // inboxes are applied: the second exchange publishes both phases'
  // changes. When none did, this one is the last and publishes.
  auto nothing_sent = [](const std::vector<Cluster::Received>& all) {
    for (const Cluster::Received& r : all) {
      if (!r.common.empty() && r.common[0] != 0) return false;
    }
    return true;
  };
  // A node that sent updates knows the publish waits for the second
  // exchange: it writes nothing before this one.
  DMG_ASSIGN_OR_RETURN(
      std::vector<Cluster::Received> got,
      Collective(out.Take(), to, nothing_sent, /*prewrite=*/!any));
  Frontier global = NewFrontier();
  PostedSums sums = NewPostedSums();
  bool sent = false;
  std::vector<Update> inbox;
  for (int k = 0; k < compute_nodes(); ++k) {
    MessageReader in(got[k].common);
    uint8_t flag = 0;
    if (!in.Get(&flag)) return Fail(absl::DataLossError("malformed post"));
    sent |= flag != 0;
    DMG_RETURN_IF_ERROR(TakeFrontier(in, k, &global, sums, &next));
  }
  DMG_RETURN_IF_ERROR(TakeInbox<T>(got, inbox));
  if (!sent) {  // every update stayed on its node: one exchange was enough
    NotePushFigures(updates, 0, 0);
    global.Seal();
    KeepSums(global, sums);
    return global;
  }
  Frontier changed = NewFrontier();
  const auto start = std::chrono::steady_clock::now();
  DMG_RETURN_IF_ERROR(scheduler_.ForRanges(
      inbox.size(), internal::kVertexGrain,
      [&](int w, uint64_t begin, uint64_t end) {
        for (uint64_t k = begin; k < end; ++k) {
          if (target.template Apply<Op>(w, inbox[k].v, inbox[k].x)) {
            changed.Add(w, inbox[k].v);
          }
        }
        return absl::OkStatus();
      }));
  changed.Seal();
  NotePushFigures(updates, inbox.size(),
                  static_cast<uint64_t>(
                      std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count()));
  // (Its sums leave out what the first part held.)
  MessageWriter second;
  PutFrontier(second, changed, &next, /*may_count=*/true);
  DMG_ASSIGN_OR_RETURN(std::vector<Cluster::Received> more,
                       Collective(second.Take()));
  for (int k = 0; k < compute_nodes(); ++k) {
    MessageReader in(more[k].common);
    DMG_RETURN_IF_ERROR(TakeFrontier(in, k, &global, sums, &changed));
  }
  global.Seal();
  KeepSums(global, sums);
  return global;
}

// A push EdgeMap with several compute nodes whose updates travel as remote
// atomics (the atomic update mode): every update, to any node's vertex, is
// a compare-and-swap on the 8-byte word holding it in the open superstep's
// buffer on its memory node, retried with the value it found until it
// lands or no longer changes anything (Op::Apply decides, as locally).
// Owners first make their pages of `target` current there; afterwards the
// owners read back the 64-byte lines the atomics touched in their ranges,
// and the others note those lines as pending (resident copies; a paged
// array forgets the touched pages). No combining, no inbox: cheap when
// updates are few, costly when many hit the same vertices.
template <typename Op, typename T, typename Value, typename Candidate>
absl::StatusOr<Frontier> Engine::AtomicPush(const Frontier& frontier,
                                            Direction along, State<T>& target,
                                            Value& value,
                                            Candidate& candidate) {
  static_assert(sizeof(T) <= 8 && (sizeof(T) & (sizeof(T) - 1)) == 0);
  const uint64_t elem = sizeof(T);
  const auto line_of = [&](uint64_t v) {
    return v * elem / StateArrayBase::kLineBytes;
  };
  const auto [own_first, own_last] = OwnPages(target);
  atomic_in_step_ = true;
  DMG_RETURN_IF_ERROR(Fail(target.MakeCurrent(own_first, own_last)));
  // No atomic may land on a page before its owner has made it current.
  DMG_RETURN_IF_ERROR(
      Fail(cluster_->Exchange(pool_->endpoint(0), "current").status()));
  struct Pending {
    VertexId v;
    T x;
    uint32_t shift;  // of v's element in its word, bytes
    coordinator::CasWord cas;
  };
  const T unset = target.initial();
  // Computes the word to swap in; false when the update changes nothing.
  auto prepare = [&](Pending& p) {
    T now;
    std::memcpy(&now, reinterpret_cast<const char*>(&p.cas.expected) + p.shift,
                sizeof(T));
    if (!Op::Apply(std::atomic_ref<T>(now), p.x, unset)) return false;
    p.cas.desired = p.cas.expected;
    std::memcpy(reinterpret_cast<char*>(&p.cas.desired) + p.shift, &now,
                sizeof(T));
    return true;
  };
  std::vector<std::vector<Pending>> pending(threads());
  arc_counts_.resize(threads());
  source_->SetFrontierKeepsBlocks(Stored(along), !Op::kFirstWins);
  DMG_RETURN_IF_ERROR(ScanFrontier(
      along, frontier,
      [&](VertexId u, std::span<const VertexId> out,
          std::span<const Weight> weights) {
        const int w = WorkerPool::current();
        CountArcs(w, out);
        for (size_t k = 0; k < out.size(); ++k) {
          const VertexId v = out[k];
          if (!candidate(v)) continue;
          const StateArrayBase::Word where = target.CurrentWord(v);
          Pending p{v, value(u, v, internal::WeightAt(weights, k)), where.shift,
                    coordinator::CasWord{}};
          p.cas.node = where.node;
          p.cas.region = where.region;
          p.cas.offset = where.offset;
          // First guess: the word as this node's copy has it (the memory
          // node's value when the operation began).
          const uint64_t first = v - where.shift / elem;
          for (uint64_t i = 0; i < 8 / elem && first + i < num_vertices();
               ++i) {
            const T e = target.Get(w, static_cast<VertexId>(first + i));
            std::memcpy(reinterpret_cast<char*>(&p.cas.expected) + i * elem, &e,
                        elem);
          }
          if (prepare(p)) pending[w].push_back(p);
        }
      }));
  TakeRemoteShare();
  Frontier next = NewFrontier();
  std::vector<uint64_t> touched((target.lines() + 63) / 64, 0);
  DMG_RETURN_IF_ERROR(Fail(scheduler_.ForEach(
      pending.size(), [&](int w, size_t list) -> absl::Status {
        return coordinator::ApplyRemoteCas(
            pool_->endpoint(w), std::span<Pending>(pending[list]), prepare,
            [&](const Pending& p) {
              next.Add(w, p.v);
              const uint64_t line = line_of(p.v);
              std::atomic_ref<uint64_t>(touched[line >> 6])
                  .fetch_or(uint64_t{1} << (line & 63),
                            std::memory_order_relaxed);
            });
      })));
  next.Seal();
  return FinishAtomicPush(target, std::move(next), touched);
}

// The end of an AtomicPush: the nodes exchange their changes and the lines
// their atomics touched (`touched`, a bit per line). Every copy of a
// touched line is stale, the owner's included: an owner READs its own now
// (it writes its lines back whole, so its copy must be current), the others
// note theirs as pending (READ if ever touched, from the open buffer). A
// paged array forgets the touched pages instead.
template <typename T>
absl::StatusOr<Frontier> Engine::FinishAtomicPush(
    State<T>& target, Frontier next, const std::vector<uint64_t>& touched) {
  const auto [own_first, own_last] = OwnPages(target);
  MessageWriter out;
  PutFrontier(out, next);
  wire::PutVertexSet(out.bytes(), touched);
  DMG_ASSIGN_OR_RETURN(std::vector<Cluster::Received> all,
                       Collective(out.Take()));
  // Values no post announces changed (a copy written for this collective
  // predates them): no packed copy holds them.
  if (mirrors_ != nullptr) mirrors_->Invalidate(IndexOf(target));
  Frontier global = NewFrontier();
  PostedSums sums = NewPostedSums();
  std::vector<uint64_t> lines(touched.size(), 0);  // every node's
  for (int k = 0; k < compute_nodes(); ++k) {
    MessageReader in(all[k].common);
    DMG_RETURN_IF_ERROR(TakeFrontier(in, k, &global, sums));
    if (!wire::GetVertexSet(in.rest(), target.lines(), [&](VertexId line) {
          lines[line >> 6] |= uint64_t{1} << (line & 63);
        })) {
      return Fail(absl::DataLossError(absl::StrFormat(
          "compute node %d posted malformed touched lines (or a line beyond "
          "state '%s')",
          k, target.name())));
    }
  }
  global.Seal();
  KeepSums(global, sums);
  struct Run {
    uint64_t first, count;
  };
  // Own lines (resident) or touched pages (paged). Word p of the line set
  // is page p's 64 lines, and ranges start on page boundaries.
  std::vector<Run> refresh;
  for (uint64_t p = 0; p < lines.size(); ++p) {
    if (lines[p] == 0) continue;
    const bool own = p >= own_first && p < own_last;
    if (!target.resident()) {
      target.MarkChangedRemotely(p, 1, own);
      if (!refresh.empty() &&
          refresh.back().first + refresh.back().count == p) {
        ++refresh.back().count;
      } else {
        refresh.push_back({p, 1});
      }
      continue;
    }
    for (uint64_t bits = lines[p]; bits != 0;) {
      const int at = std::countr_zero(bits);
      const int run = std::countr_one(bits >> at);
      bits &= run == 64 ? 0 : ~(((uint64_t{1} << run) - 1) << at);
      const uint64_t first = p * 64 + at;
      if (own) {
        target.MarkOwnLinesChangedRemotely(first, run);
        refresh.push_back({first, static_cast<uint64_t>(run)});
      } else {
        target.MarkPending(first, run);
      }
    }
  }
  DMG_RETURN_IF_ERROR(
      Fail(scheduler_.ForEach(refresh.size(), [&](int w, size_t j) {
        if (target.resident()) {
          target.RefreshLines(w, refresh[j].first, refresh[j].count);
        } else {
          target.Refresh(w, refresh[j].first, refresh[j].count);
        }
        return pool_->endpoint(w).Flush();
      })));
  return global;
}

template <typename Op, typename T, typename Value, typename Cond>
absl::StatusOr<Frontier> Engine::EdgeMap(const Frontier& frontier,
                                         Direction along, Mode mode,
                                         State<T>& target, Value value,
                                         Cond cond) {
  // The choices' inputs first: with several compute nodes, the frontier's
  // degrees may take a collective (EnsureFrontierSums), before the
  // operation begins. A partial frontier (some parts came as counts) is
  // fetched whole where its counts are no longer at hand (one kept from an
  // earlier step) or the step pulls: alike on every node.
  std::optional<Frontier> fetched;
  const Frontier* f = &frontier;
  if (!frontier.whole() && PostedMembers(frontier) == nullptr) {
    DMG_ASSIGN_OR_RETURN(fetched, CompleteFrontier(frontier));
    f = &*fetched;
  }
  const PullPlan plan = PlanPull(mode, *f, along, Op::kFirstWins);
  DMG_RETURN_IF_ERROR(EnsureFrontierSums(*f, along, SumsNeeded(plan)));
  DMG_RETURN_IF_ERROR(
      Prepare(/*open_superstep=*/true, /*fetch_pending=*/false));
  // A target worth updating: cond holds, and (Claim) it is still unset;
  // with stale_targets, another node's target on a pending line counts as
  // unset (its owner refuses it if claimed: ChooseTargetRefresh).
  bool stale_targets = false;
  auto candidate = [&](VertexId v) {
    if constexpr (Op::kFirstWins) {
      const bool unset = stale_targets && !Owns(v)
                             ? target.UnsetOrPending(WorkerPool::current(), v)
                             : target.Unset(v);
      if (!unset) return false;
    }
    return cond(v);
  };
  const bool pull = ChoosePull(plan, *f, along);
  if (pull && !f->whole()) {
    DMG_ASSIGN_OR_RETURN(fetched, CompleteFrontier(*f));
    f = &*fetched;
  }
  const Frontier& active = *f;
  const bool atomic = !pull && ChooseUpdateMode(active, along, sizeof(T)) ==
                                   UpdateMode::kAtomic;
  // Other nodes' published changes stay pending (lazy refresh) for a push
  // that reads no target's state (every vertex a candidate, not
  // first-wins): its value reads its own sources. A push that reads its
  // targets takes them in bulk or on demand, as the coordinator estimates
  // cheaper (ChooseTargetRefresh). (Accessors fetch a pending line that
  // anything reads; a step others may steal from reads as a VertexMap does.)
  constexpr bool kReadsOnlySources =
      std::is_same_v<Cond, AllVertices> && !Op::kFirstWins;
  if (atomic) {
    DMG_RETURN_IF_ERROR(FetchPendingState());
  } else if (pull) {
    // The value reads the sources the in-edges name.
    DMG_RETURN_IF_ERROR(ArmSourceReads(internal::Opposite(along)));
  } else if (!kReadsOnlySources) {
    switch (ChooseTargetRefresh(active, along, Op::kFirstWins, sizeof(T))) {
      case Refresh::kBulk:
        ArmPendingReads(/*all_on_touch=*/true);
        break;
      case Refresh::kStale:
        stale_targets = true;
        break;
      case Refresh::kDemand:
        break;
    }
  }
  if (atomic) {
    return AtomicPush<Op>(active, along, target, value, candidate);
  }
  if (!pull) return PushEdgeMap<Op>(active, along, target, value, candidate);
  if constexpr (Op::kFirstWins) {
    DMG_ASSIGN_OR_RETURN(std::optional<Frontier> next,
                         BottomUp<Op>(active, along, target, value, candidate));
    if (next.has_value()) return *std::move(next);
  }
  // Every vertex a candidate (AllVertices, not first-wins): nothing to
  // skip, and the scan is a full one (the hot cache admits at once).
  constexpr bool kEveryVertex =
      std::is_same_v<Cond, AllVertices> && !Op::kFirstWins;
  return PullEdgeMap<Op, kEveryVertex>(active, along, target, value, candidate);
}

// EdgeMap's push: the frontier's adjacency, each update applied at once
// to this node's vertices; with several compute nodes the others' go to
// their owners (FinishPush).
template <typename Op, typename T, typename Value, typename Candidate>
absl::StatusOr<Frontier> Engine::PushEdgeMap(const Frontier& frontier,
                                             Direction along, State<T>& target,
                                             Value& value,
                                             Candidate& candidate) {
  Frontier next = NewFrontier();
  // Updates to other nodes' vertices wait in the workers' outboxes.
  ClearOutboxes();
  arc_counts_.resize(threads());
  source_->SetFrontierKeepsBlocks(Stored(along), !Op::kFirstWins);
  DMG_RETURN_IF_ERROR(ScanFrontier(
      along, frontier,
      [&](VertexId u, std::span<const VertexId> out,
          std::span<const Weight> weights) {
        const int w = WorkerPool::current();
        // Updates made for another node's work item travel like remote
        // ones, even to this node's own vertices: a node writes state
        // only for its own work.
        const bool taking = taking_[w] != 0;
        CountArcs(w, out);
        for (size_t k = 0; k < out.size(); ++k) {
          const VertexId v = out[k];
          if (!candidate(v)) continue;
          const T x = value(u, v, internal::WeightAt(weights, k));
          if (taking || !Owns(v)) {
            ToOutbox<Op, T>(w, v, x);
          } else if (target.template Apply<Op>(w, v, x)) {
            if constexpr (Op::kFirstWins) {
              next.AddUnique(w, v);  // only the winning claim gets here
            } else {
              next.Add(w, v);
            }
          }
        }
      }));
  next.Seal();
  TakeRemoteShare();
  if (compute_nodes() == 1) return next;  // every update was applied here
  return FinishPush<Op>(target, std::move(next));
}

// EdgeMap's bottom-up pull of a first-wins update (Claim): each candidate
// stops at its first frontier neighbour, so only prefixes of adjacency are
// read where the source can. Nothing (no value) when it cannot: the
// caller folds instead.
template <typename Op, typename T, typename Value, typename Candidate>
absl::StatusOr<std::optional<Frontier>> Engine::BottomUp(
    const Frontier& frontier, Direction along, State<T>& target, Value& value,
    Candidate& candidate) {
  DMG_RETURN_IF_ERROR(WholeForPull(frontier));
  Frontier next = NewFrontier();
  // With a GPU share (GpuShareForBottomUp): its candidates go to the
  // kernels, on their own thread, while the workers scan the rest.
  DMG_ASSIGN_OR_RETURN(const bool gpu,
                       GpuShareForBottomUp(internal::Opposite(along)));
  const VertexId cut =
      gpu ? static_cast<VertexId>(gpu_.kernels->end()) : own_begin_;
  // The GPU's candidates are not the workers' (0 without a share: chunks
  // taken from other nodes lie below own_begin_).
  const VertexId gpu_below = gpu ? cut : 0;
  std::vector<int64_t> parents;
  absl::Status gpu_status;
  std::jthread gpu_thread;
  if (gpu) {
    parents.assign(cut - own_begin_, kNotCandidate);
    DMG_RETURN_IF_ERROR(scheduler_.ForRanges(
        parents.size(), internal::kVertexGrain,
        [&](int, uint64_t begin, uint64_t end) {
          for (uint64_t i = begin; i < end; ++i) {
            if (candidate(static_cast<VertexId>(own_begin_ + i))) {
              parents[i] = -1;
            }
          }
          return absl::OkStatus();
        }));
    gpu_thread = std::jthread([&] {
      gpu_status =
          gpu_.kernels->BfsBottomUp(frontier.words(), parents, nullptr);
    });
  }
  DMG_ASSIGN_OR_RETURN(
      const bool scanned,
      ScanPrefixes(
          internal::Opposite(along),
          [&](VertexId begin, VertexId end, uint8_t* out) {
            for (VertexId v = begin; v < end; ++v) {
              out[v - begin] = v >= gpu_below && candidate(v);
            }
          },
          [&](int w, VertexId v, std::span<const VertexId> in,
              std::span<const Weight> weights) {
            for (size_t k = 0; k < in.size(); ++k) {
              const VertexId u = in[k];
              if (!frontier.Contains(u)) continue;
              const T x = value(u, v, internal::WeightAt(weights, k));
              if (taking_[w] != 0) {
                // A chunk taken from v's owner: the claim is the owner's
                // to make.
                ToOutbox<Op, T>(w, v, x);
              } else if (target.template ApplyOwned<Op>(w, v, x)) {
                // v's chunk (4096-aligned) is this worker's alone.
                next.AddExclusive(w, v);
              }
              return true;
            }
            return false;
          },
          /*may_steal=*/!gpu));
  if (gpu) {
    gpu_thread.join();
    DMG_RETURN_IF_ERROR(Fail(gpu_status));
    // No prefix scan (the pull runs instead, the share's vertices too):
    // the GPU's parents are dropped.
    if (scanned) {
      DMG_RETURN_IF_ERROR(
          (ApplyGpuParents<Op, T>(parents, target, value, next)));
    }
  }
  if (!scanned) return std::optional<Frontier>();
  next.Seal();
  if (scan_shared_) {
    DMG_ASSIGN_OR_RETURN(Frontier merged,
                         FinishPush<Op>(target, std::move(next)));
    return std::optional<Frontier>(std::move(merged));
  }
  DMG_ASSIGN_OR_RETURN(Frontier merged, MergeFrontier(std::move(next)));
  return std::optional<Frontier>(std::move(merged));
}

// A GPU bottom-up step's parents: each candidate of the share that found
// one claims value(parent, v, 1) (the first frontier in-neighbour in
// adjacency order, as the CPU's step takes), in grain chunks, each its
// worker's alone.
template <typename Op, typename T, typename Value>
absl::Status Engine::ApplyGpuParents(std::span<const int64_t> parents,
                                     State<T>& target, Value& value,
                                     Frontier& next) {
  stats_.gpu.used = true;
  ++stats_.gpu.bottom_up_steps;
  return scheduler_.ForRanges(
      parents.size(), internal::kVertexGrain,
      [&](int w, uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) {
          if (parents[i] < 0 || parents[i] == kNotCandidate) continue;
          const VertexId v = static_cast<VertexId>(own_begin_ + i);
          const T x = value(static_cast<VertexId>(parents[i]), v, Weight{1});
          if (target.template ApplyOwned<Op>(w, v, x)) next.AddExclusive(w, v);
        }
        return absl::OkStatus();
      });
}

// EdgeMap's pull: each candidate folds the updates of its frontier
// neighbours in adjacency order and applies them once. A split vertex's
// partial fold waits in its worker's slot for the next piece.
template <typename Op, bool kEveryVertex, typename T, typename Value,
          typename Candidate>
absl::StatusOr<Frontier> Engine::PullEdgeMap(const Frontier& frontier,
                                             Direction along, State<T>& target,
                                             Value& value,
                                             Candidate& candidate) {
  DMG_RETURN_IF_ERROR(WholeForPull(frontier));
  Frontier next = NewFrontier();
  struct alignas(64) Pending {
    T acc{};
    bool found = false;
  };
  std::vector<Pending> pending(threads());
  const RangeFn want = [&](VertexId begin, VertexId end) {
    for (VertexId v = begin; v < end; ++v) {
      if (candidate(v)) return true;
    }
    return false;
  };
  DMG_RETURN_IF_ERROR(ScanBlocks(
      internal::Opposite(along), kEveryVertex ? nullptr : &want,
      [&](int w, uint32_t, const BlockView& b, bool continues) {
        Pending& p = pending[w];
        // A local copy: its captures (a state reader) stay in registers
        // across the edge loop, which calls out only on paged reads.
        const Value value_of = value;
        const uint32_t count = b.vertex_count();
        // A unit taken from another node (stage 2): its vertices are that
        // node's, and their results travel to it.
        const auto [lo, hi] = WorkIndices(w, b);
        const bool taking = taking_[w] != 0;
        uint64_t hits = 0;  // arcs from the frontier (the cost model's)
        for (uint32_t i = lo; i < hi; ++i) {
          const VertexId v = b.first_vertex() + i;
          if (!candidate(v)) continue;
          T acc = p.acc;
          bool found = p.found;
          if (!(Op::kFirstWins && found)) {
            std::span<const VertexId> in = b.targets(v);
            std::span<const Weight> weights =
                b.weighted() ? b.weights(v) : std::span<const Weight>();
            for (size_t k = 0; k < in.size(); ++k) {
              const VertexId u = in[k];
              if (!frontier.Contains(u)) continue;
              ++hits;
              const T x = value_of(u, v, internal::WeightAt(weights, k));
              acc = found ? Op::Combine(acc, x) : x;
              found = true;
              if constexpr (Op::kFirstWins) break;
            }
          }
          if (continues && i + 1 == count) {
            p = {acc, found};
            continue;
          }
          p.found = false;
          if (!found) continue;
          if (taking) {
            ToOutbox<Op, T>(w, v, acc);
          } else if (target.template Apply<Op>(w, v, acc)) {
            next.Add(w, v);
          }
        }
        arc_counts_[w].hits += hits;
      },
      /*may_steal=*/true));
  TakePullHits();
  next.Seal();
  // Taken units' results go to their owners as a push's updates do.
  if (scan_shared_) return FinishPush<Op>(target, std::move(next));
  return MergeFrontier(std::move(next));
}

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_EDGE_MAP_H_
