// Fuzzes the decoders of what compute nodes post to each other
// (compute_node/wire_codec.*, message.h), read the way the engine reads a
// post: a MessageReader, a vertex set (GetVertexSet: bitmap or varint gaps;
// GetVertexSetWords must agree with it) and then combined updates
// (GetUpdates) of one of the value types the algorithms use. Bad bytes must be
// refused (false); what is accepted must hold: members ascending and below
// num_vertices, update targets strictly ascending; and it must survive a round
// trip (Put then Get gives the same set / updates back, consuming every byte).
// Input: [value type][u32 num_vertices][vertex set][updates...].
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "compute_node/message.h"
#include "compute_node/wire_codec.h"
#include "coordinator/outbox.h"
#include "fuzz/fuzz_util.h"

namespace {

namespace wire = dmg::compute::wire;
using dmg::store::VertexId;

// The word decoder (GetVertexSetWords) accepts what the member decoder
// accepts, gives the same members and consumes the same bytes.
void CheckWordDecoder(std::string_view in, uint64_t n) {
  std::string_view a = in, b = in;
  std::vector<VertexId> members, from_words;
  const bool ok =
      wire::GetVertexSet(a, n, [&](VertexId v) { members.push_back(v); });
  const bool ok_words = wire::GetVertexSetWords(
      b, n, [&](VertexId v) { from_words.push_back(v); },
      [&](uint64_t first, const char* bytes, uint64_t count) {
        for (uint64_t k = 0; k < count; ++k) {
          uint64_t w;
          std::memcpy(&w, bytes + 8 * k, 8);
          for (; w != 0; w &= w - 1) {
            from_words.push_back(
                static_cast<VertexId>((first + k) * 64 + std::countr_zero(w)));
          }
        }
      });
  FUZZ_CHECK(ok == ok_words);
  if (ok) {
    FUZZ_CHECK(members == from_words);
    FUZZ_CHECK(a.size() == b.size());
  }
}

void CheckVertexSet(std::string_view& in, uint64_t n) {
  CheckWordDecoder(in, n);
  std::vector<VertexId> members;
  if (!wire::GetVertexSet(in, n, [&](VertexId v) { members.push_back(v); })) {
    return;
  }
  for (size_t k = 0; k < members.size(); ++k) {
    FUZZ_CHECK(members[k] < n);
    FUZZ_CHECK(k == 0 || members[k - 1] < members[k]);
  }
  std::vector<uint64_t> words((n + 63) / 64);
  for (VertexId v : members) words[v / 64] |= uint64_t{1} << (v % 64);
  std::string again;
  wire::PutVertexSet(again, words);
  std::string_view view = again;
  std::vector<VertexId> back;
  FUZZ_CHECK(
      wire::GetVertexSet(view, n, [&](VertexId v) { back.push_back(v); }));
  FUZZ_CHECK(view.empty());
  FUZZ_CHECK(back == members);
}

template <typename T>
void CheckUpdates(std::string_view in) {
  using U = dmg::coordinator::RemoteUpdate<T>;
  std::vector<U> updates;
  if (!wire::GetUpdates<U>(in, updates)) return;
  for (size_t k = 1; k < updates.size(); ++k) {
    FUZZ_CHECK(updates[k - 1].v < updates[k].v);
  }
  std::string again;
  wire::PutUpdates<U>(again, updates);
  std::vector<U> back;
  FUZZ_CHECK(wire::GetUpdates<U>(again, back));
  FUZZ_CHECK(back.size() == updates.size());
  for (size_t k = 0; k < back.size(); ++k) {
    FUZZ_CHECK(back[k].v == updates[k].v);
    FUZZ_CHECK(std::memcmp(&back[k].x, &updates[k].x, sizeof(T)) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dmg::compute::MessageReader in(
      std::string_view(reinterpret_cast<const char*>(data), size));
  uint8_t type = 0;
  uint32_t n = 0;
  if (!in.Get(&type) || !in.Get(&n)) return 0;
  // Up to 2^16 vertices keeps the round trip's bitmap small (8 KB).
  const uint64_t num_vertices = 1 + n % (uint64_t{1} << 16);
  CheckVertexSet(in.rest(), num_vertices);
  switch (type % 6) {
    case 0:
      CheckUpdates<int64_t>(in.rest());
      break;
    case 1:
      CheckUpdates<uint32_t>(in.rest());
      break;
    case 2:
      CheckUpdates<int32_t>(in.rest());
      break;
    case 3:
      CheckUpdates<float>(in.rest());
      break;
    case 4:
      CheckUpdates<double>(in.rest());
      break;
    case 5: {  // a count-prefixed array (MessageReader::GetArray)
      std::vector<uint64_t> xs;
      if (in.GetArray<uint64_t>(&xs)) FUZZ_CHECK(xs.size() * 8 <= size);
      break;
    }
  }
  return 0;
}
