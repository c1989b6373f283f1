// The 64-bit hash of an arc that store images sum per direction: image
// validation checks the in-blocks against the out-blocks with it, and the
// superblock's arc_digest (the graph's fingerprint) is its sum over the
// out-arcs.
#ifndef DMG_STORE_ARC_HASH_H_
#define DMG_STORE_ARC_HASH_H_

#include <cstdint>

#include "store/graph.h"

namespace dmg::store {

// splitmix64's finalizer: a bijection of 64-bit words that spreads every
// input bit over the output.
inline uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}
// Hashes of the arc u -> v (with its weight), summed per direction: a
// changed, lost or added arc changes the sum (Mix is a bijection, so two
// different arcs never hash alike); two changes cancel with probability
// 2^-64.
inline uint64_t PairHash(VertexId u, VertexId v) {
  return Mix(((uint64_t{u} << 32) | v) ^ 0x6a09e667f3bcc909ull);
}
inline uint64_t ArcHash(VertexId u, VertexId v, Weight w) {
  return Mix(PairHash(u, v) ^ static_cast<uint32_t>(w));
}

// The sum of ArcHash over a CSR's arcs (in parallel).
uint64_t ArcDigestOf(const Csr& csr, int threads);

}  // namespace dmg::store

#endif  // DMG_STORE_ARC_HASH_H_
