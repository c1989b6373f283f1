// The vertex-program API: everything an algorithm in algorithms/ uses, in
// the spirit of Ligra's edgeMap/vertexMap and GAPBS's kernels. A program
// never sees blocks, work units, pieces of split vertices, resident or
// paged state, or the transport.
//
//   State<T>& s = engine.NewState<T>(name, initial, hint)
//       a vertex-property array on the memory nodes, double-buffered by
//       superstep. The hint says how the program reads it (CacheHint:
//       per edge, per vertex, claimed, rarely); the cache keeps arrays local
//       in that order (a paged claimed array keeps a bit per vertex). Usable
//       from the next engine operation on. s.Get(v), s.Set(v, x),
//       s.Apply<Op>(v, x); s.reader() for read-only hot loops.
//   VertexMap(fn(v)) / VertexMap(subset, fn(v))
//       fn for every vertex (or every vertex of a frontier), in parallel.
//   VertexFilter(keep(v)) / VertexFilter(subset, keep(v)) -> Frontier
//       the vertices (of a frontier) keep accepts.
//   Reduce<Add|Min|Max>(fn(v)) -> value
//       fn over every vertex, combined in a fixed order: the same result
//       for any thread count, cache size or number of nodes.
//   EdgeMap<Op>(frontier, along, mode, target, value(u, v, w), cond(v))
//       -> next frontier. For every arc u->v (along kOut; v->u for kIn)
//       with u in the frontier and cond(v) true, combines value(u, v, w)
//       into target[v] with the named update Op (Add, Min, Claim, Or; see
//       updates.h). Returns the vertices whose target changed. Mode kPush
//       reads the frontier's adjacency and applies updates atomically;
//       kPull reads the candidates' adjacency, folds each one's updates
//       locally and applies them once (Claim stops at the first); kAuto
//       lets the engine choose per call. cond must not depend on what this
//       EdgeMap changes. w is the arc's weight (1 if unweighted).
//       With several compute nodes the frontier returned may hold only
//       this node's members and a count of the others' (Frontier::whole()
//       false): size() and empty() are the whole frontier's on every node,
//       vertices() what this node holds; the engine fetches the rest where
//       an operation needs them.
//   Union(into, other)       into gains other's members (counted across
//                            the nodes where either is partial)
//   Gather<Op>(neighbours, value(u, v, w), finish(v, combined)) -> sum
//       for every vertex v, value over all its neighbours u in direction
//       `neighbours` (kIn: in-neighbours), combined with Op in a fixed
//       order (Op's identity when none): a piece of fewer than 8 values
//       in adjacency order, a longer one in four interleaved chains then
//       combined ((c0+c1)+(c2+c3)), which depends only on the store's
//       blocks; then finish(v, combined); returns the sum of finish's
//       results, added in a fixed order. That is the pull, which the
//       engine chooses unless pushing (every vertex u sending value along
//       its arcs) is estimated cheaper or --direction=push forces it; a
//       push combines in arrival order, equal within rounding.
//   Degrees(d, state)        adds every vertex's degree into state (READs
//                            block headers only)
//   ForEachNeighbourhood(d, pick, visit)   adjacency of other vertices
//   ForEachAdjacency(d, want, fn(w, v, N(v)))   every own vertex's whole
//       adjacency (only the units holding a vertex want(begin, end)
//       accepts, when given): for kernels that work on lists themselves
//       (Afforest); with State::CompareExchange, a union-find's hook.
//       ForEachAdjacencyShared(d, want, own, taken) -> shared: the same
//       with stage 2 (idle nodes take units; taken(w, v, N(v)) for another
//       node's v); SendToOwners(pairs) then brings what takers learned to
//       each vertex's owner (one exchange)
//   EndSuperstep()           commits every state array and passes the
//                            barrier; the next operation opens the next one
//   Result(state)            the final version, read back from memory
//                            (ResultRange() of it where ResultSplit())
//   Carry(name, &x), Resume() -> resumed
//       what makes a program resumable (`dmg run --resume`): it names the
//       values its loop carries from one superstep to the next (scalars,
//       frontiers), which the engine records with every superstep, and
//       calls Resume() once, after declaring its state arrays and carried
//       values and before its first operation. true: the job continues
//       after the last superstep an earlier attempt completed, with every
//       state array and carried value as it was then, and the program
//       skips its set-up; false: a fresh start. The loop must be written
//       so that it can go on from any superstep's end (update carried
//       values before EndSuperstep; test for the end at the loop's top).
// Whole vertices: every callback sees a vertex's whole adjacency or its
// combined value, however the store split it over blocks.
//
// The operations' code: vertex_ops.h (state, VertexMap, VertexFilter,
// Reduce, AllReduce, Result), edge_map.h (EdgeMap: push, pull, and with
// several compute nodes the batch and atomic update exchanges), gather.h.
#ifndef DMG_COMPUTE_NODE_VERTEX_PROGRAM_H_
#define DMG_COMPUTE_NODE_VERTEX_PROGRAM_H_

#include "compute_node/edge_map.h"    // IWYU pragma: export
#include "compute_node/gather.h"      // IWYU pragma: export
#include "compute_node/vertex_ops.h"  // IWYU pragma: export

#endif  // DMG_COMPUTE_NODE_VERTEX_PROGRAM_H_
