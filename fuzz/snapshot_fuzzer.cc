// Fuzzes the snapshot reader (memory_node/snapshot.*) that a restarting
// memory node trusts with its store: any input is read as a snapshot file
// of that size. An error is fine; a snapshot that passes must hold exactly
// the store bytes its header announced, within the input.
// Seeds: snapshots of a small store and of an empty one (make_corpus).
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "fuzz/fuzz_util.h"
#include "memory_node/snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::FILE* f = fmemopen(const_cast<uint8_t*>(data), size, "rb");
  if (f == nullptr) return 0;
  absl::StatusOr<dmg::memory_node::Snapshot> s =
      dmg::memory_node::ReadSnapshot(f, size, "fuzz.dmgsnap");
  std::fclose(f);
  if (s.ok()) FUZZ_CHECK(s->store.size() < size);
  return 0;
}
