// The compact encodings compute nodes post to each other: round trips of
// vertex sets and updates against plain vectors, the smaller form chosen,
// and malformed input refused.
#include "compute_node/wire_codec.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dmg::compute::wire {
namespace {

std::vector<uint64_t> Bitmap(const std::set<VertexId>& members, uint64_t n) {
  std::vector<uint64_t> words((n + 63) / 64, 0);
  for (VertexId v : members) words[v / 64] |= uint64_t{1} << (v % 64);
  return words;
}

std::vector<VertexId> Decode(std::string_view in, uint64_t n, bool* ok) {
  std::vector<VertexId> out;
  *ok = GetVertexSet(in, n, [&](VertexId v) { out.push_back(v); });
  return out;
}

TEST(WireCodecTest, VertexSetsRoundTripInTheSmallerForm) {
  const uint64_t n = 1 << 20;
  std::mt19937_64 rng(7);
  for (uint64_t count : {0, 1, 2, 100, 50000, 700000}) {
    SCOPED_TRACE(count);
    std::set<VertexId> members;
    while (members.size() < count) members.insert(rng() % n);
    std::string out = "x";  // a prefix stays untouched
    PutVertexSet(out, Bitmap(members, n));
    ASSERT_EQ(out[0], 'x');
    bool ok = false;
    const std::vector<VertexId> got =
        Decode(std::string_view(out).substr(1), n, &ok);
    ASSERT_TRUE(ok);
    EXPECT_EQ(got, std::vector<VertexId>(members.begin(), members.end()));
    // Never more than a bitmap of the graph or 4 bytes a member, plus a
    // header.
    EXPECT_LE(out.size(), std::min<uint64_t>(n / 8, 4 * count) + 24);
  }
  // Dense within a narrow range: a bitmap of that range only.
  std::set<VertexId> dense;
  for (VertexId v = 524288; v < 524288 + 65536; v += 2) dense.insert(v);
  std::string out;
  PutVertexSet(out, Bitmap(dense, n));
  EXPECT_LE(out.size(), 65536 / 8 + 16);
  bool ok = false;
  EXPECT_EQ(Decode(out, n, &ok).size(), dense.size());
  EXPECT_TRUE(ok);
}

TEST(WireCodecTest, AKnownSizeAndExtentGiveTheSameBytes) {
  // What a frontier posts from its list (its size, its least and greatest
  // member) against the scan of the whole bitmap: sparse sets with gaps of
  // one to several varint bytes, dense ones (a bitmap), one member.
  const uint64_t n = 1 << 20;
  std::mt19937_64 rng(11);
  for (uint64_t count : {1, 2, 3, 600, 5000, 200000}) {
    for (uint64_t spread : {uint64_t{64}, uint64_t{4096}, n}) {
      SCOPED_TRACE(testing::Message() << count << " over " << spread);
      const uint64_t base = rng() % (n - spread + 1);
      std::set<VertexId> members;
      while (members.size() < std::min(count, spread)) {
        members.insert(static_cast<VertexId>(base + rng() % spread));
      }
      const std::vector<uint64_t> words = Bitmap(members, n);
      std::string scanned = "x", known = "x";
      PutVertexSet(scanned, words);
      PutVertexSet(known, words, members.size(), *members.begin() / 64,
                   *members.rbegin() / 64 + 1);
      EXPECT_EQ(known, scanned);
    }
  }
  // A count below the words' members (a caller's mistake) writes no more
  // members than it says: the first ones, in bounds.
  std::set<VertexId> many;
  for (VertexId v = 100; v < 100000; v += 997) many.insert(v);
  std::string out;
  PutVertexSet(out, Bitmap(many, n), 5, 100 / 64, *many.rbegin() / 64 + 1);
  bool ok = false;
  const std::vector<VertexId> got = Decode(out, n, &ok);
  EXPECT_TRUE(ok);
  EXPECT_EQ(got,
            std::vector<VertexId>(many.begin(), std::next(many.begin(), 5)));
}

TEST(WireCodecTest, MalformedVertexSetsAreRefused) {
  const uint64_t n = 1000;
  std::string out;
  PutVertexSet(out, Bitmap({3, 999}, n));
  bool ok = true;
  // A member beyond a smaller graph, and every truncation.
  Decode(out, 999, &ok);
  EXPECT_FALSE(ok);
  for (size_t cut = 0; cut < out.size(); ++cut) {
    Decode(std::string_view(out).substr(0, cut), n, &ok);
    EXPECT_FALSE(ok) << cut;
  }
  Decode(std::string_view("\x07", 1), n, &ok);
  EXPECT_FALSE(ok) << "an unknown kind";
}

// The word decoder gives the same members as the member decoder, for both
// forms, and refuses what it refuses (a member past the graph in the last
// word, every truncation).
TEST(WireCodecTest, WordDecodingAgreesWithMemberDecoding) {
  const uint64_t n = 70000;
  std::mt19937_64 rng(11);
  for (uint64_t count : {0, 3, 9000}) {
    SCOPED_TRACE(count);
    std::set<VertexId> members;
    while (members.size() < count) members.insert(rng() % n);
    members.insert(n - 1);
    std::string out;
    PutVertexSet(out, Bitmap(members, n));
    for (size_t cut = 0; cut <= out.size(); ++cut) {
      std::string_view a = std::string_view(out).substr(0, cut), b = a;
      bool ok_members = false;
      std::vector<VertexId> expected = Decode(a, n, &ok_members);
      std::vector<VertexId> got;
      const bool ok_words = GetVertexSetWords(
          b, n, [&](VertexId v) { got.push_back(v); },
          [&](uint64_t first, const char* bytes, uint64_t words) {
            for (uint64_t k = 0; k < words; ++k) {
              uint64_t w;
              std::memcpy(&w, bytes + 8 * k, 8);
              for (; w != 0; w &= w - 1) {
                got.push_back(static_cast<VertexId>((first + k) * 64 +
                                                    std::countr_zero(w)));
              }
            }
          });
      ASSERT_EQ(ok_words, ok_members) << cut;
      if (ok_members) {
        EXPECT_EQ(got, expected);
        EXPECT_TRUE(b.empty());
      }
    }
    bool ok = true;
    Decode(out, n - 1, &ok);
    std::string_view again = out;
    EXPECT_EQ(GetVertexSetWords(
                  again, n - 1, [](VertexId) {},
                  [](uint64_t, const char*, uint64_t) {}),
              ok)
        << "a member past a smaller graph";
    EXPECT_FALSE(ok);
  }
}

template <typename T>
struct Update {
  VertexId v;
  T x;
};

template <typename T>
void CheckUpdatesRoundTrip(std::vector<Update<T>> updates) {
  std::string out;
  PutUpdates<Update<T>>(out, updates);
  std::vector<Update<T>> got;
  ASSERT_TRUE(GetUpdates<Update<T>>(out, got));
  ASSERT_EQ(got.size(), updates.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].v, updates[k].v);
    EXPECT_EQ(got[k].x, updates[k].x);
  }
  // Every truncation is refused (an empty input is "nothing sent").
  for (size_t cut = 1; cut < out.size(); ++cut) {
    std::vector<Update<T>> part;
    EXPECT_FALSE(
        GetUpdates<Update<T>>(std::string_view(out).substr(0, cut), part))
        << cut;
  }
}

TEST(WireCodecTest, UpdatesRoundTripSmall) {
  CheckUpdatesRoundTrip<int64_t>(
      {{0, 0}, {5, -1}, {6, INT64_MAX}, {4000000000u, INT64_MIN}});
  CheckUpdatesRoundTrip<uint32_t>({{1, 7}, {2, UINT32_MAX}});
  CheckUpdatesRoundTrip<double>({{10, 0.25}, {11, -1e300}});
  CheckUpdatesRoundTrip<int32_t>({});
  // Distances of a BFS-like step: about two bytes an update, not 16.
  std::vector<Update<int64_t>> near;
  for (VertexId v = 0; v < 100000; v += 3) near.push_back({v, 4});
  std::string out;
  PutUpdates<Update<int64_t>>(out, near);
  EXPECT_LE(out.size(), 2 * near.size() + 8);
}

TEST(WireCodecTest, UpdatesOutOfOrderOrOutOfRangeAreRefused) {
  std::string out;
  PutVarint(out, 2);
  PutVarint(out, 5);
  PutVarint(out, 1);
  PutVarint(out, 0);  // a gap of 0: a repeated target
  PutVarint(out, 1);
  std::vector<Update<uint32_t>> got;
  EXPECT_FALSE(GetUpdates<Update<uint32_t>>(out, got));
  // A value too large for its type.
  std::string big;
  PutVarint(big, 1);
  PutVarint(big, 5);
  PutVarint(big, uint64_t{1} << 40);
  std::vector<Update<uint32_t>> narrow;
  EXPECT_FALSE(GetUpdates<Update<uint32_t>>(big, narrow));
  // Trailing bytes.
  std::string tail;
  PutUpdates<Update<uint32_t>>(tail, std::vector<Update<uint32_t>>{{1, 1}});
  tail.push_back('\0');
  std::vector<Update<uint32_t>> t;
  EXPECT_FALSE(GetUpdates<Update<uint32_t>>(tail, t));
  // A gap that wraps the 64-bit sum around to a smaller target (found by
  // fuzz/wire_codec_fuzzer): 5, then 5 + (2^64 - 1) = 4.
  std::string wrap;
  PutVarint(wrap, 2);
  PutVarint(wrap, 5);
  PutVarint(wrap, 1);
  PutVarint(wrap, ~uint64_t{0});
  PutVarint(wrap, 1);
  std::vector<Update<uint32_t>> w;
  EXPECT_FALSE(GetUpdates<Update<uint32_t>>(wrap, w));
}

}  // namespace
}  // namespace dmg::compute::wire
