// Frontier alone: membership, the three ways to add, range queries, and the
// storage a dead frontier hands on to the next (which must come back empty).
#include "compute_node/frontier.h"

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace dmg::compute {
namespace {

std::vector<VertexId> Members(const Frontier& f) {
  std::vector<VertexId> v(f.vertices().begin(), f.vertices().end());
  std::sort(v.begin(), v.end());
  return v;
}

TEST(FrontierTest, AddUniqueMembersAreContainedOnlyAfterSeal) {
  Frontier f(1000, 2);
  f.AddUnique(0, 5);
  f.AddUnique(1, 999);
  f.Add(1, 64);
  EXPECT_FALSE(f.Contains(5));  // its bit waits for Seal
  EXPECT_TRUE(f.Contains(64));
  f.Seal();
  EXPECT_TRUE(f.Contains(5));
  EXPECT_TRUE(f.Contains(999));
  EXPECT_EQ(Members(f), (std::vector<VertexId>{5, 64, 999}));
  EXPECT_EQ(f.SortedVertices(), (std::vector<VertexId>{5, 64, 999}));
}

// Words appended after other additions: the members so far keep their
// order, the words' new members follow in ascending order, and members
// already in are not listed twice.
TEST(FrontierTest, AppendedWordsFollowInAscendingOrder) {
  Frontier f(1000, 2);
  f.AddExclusive(1, 900);
  f.AddExclusive(0, 130);
  std::vector<uint64_t> words(3, 0);
  words[0] = (uint64_t{1} << 7) | (uint64_t{1} << 63);  // 135, 191
  words[1] = uint64_t{1} << 2;                          // 194
  words[2] = 0;
  // Word 2 of the frontier (vertices 128-191) on: 130 is in already.
  words[0] |= uint64_t{1} << 2;
  f.AppendWords(2, words.data(), words.size());
  f.Seal();
  std::vector<VertexId> list(f.vertices().begin(), f.vertices().end());
  ASSERT_EQ(list.size(), 5u);
  EXPECT_EQ(std::vector<VertexId>(list.begin() + 2, list.end()),
            (std::vector<VertexId>{135, 191, 194}));
  for (VertexId v : {130u, 135u, 191u, 194u, 900u}) EXPECT_TRUE(f.Contains(v));
  EXPECT_FALSE(f.Contains(129));
  f.AppendWords(0, words.data(), 0);  // nothing
  EXPECT_EQ(f.size(), 5u);
}

TEST(FrontierTest, AnyInMatchesAScanOfContains) {
  std::mt19937 rng(3);
  const uint64_t n = 700;
  Frontier f(n, 1);
  std::set<VertexId> in;
  for (int k = 0; k < 12; ++k) {
    VertexId v = rng() % n;
    f.Add(0, v);
    in.insert(v);
  }
  f.Seal();
  for (int q = 0; q < 5000; ++q) {
    uint64_t a = rng() % (n + 1), b = rng() % (n + 1);
    if (a > b) std::swap(a, b);
    bool expect = in.lower_bound(a) != in.end() && *in.lower_bound(a) < b;
    ASSERT_EQ(f.AnyIn(a, b), expect) << a << " " << b;
  }
}

TEST(FrontierTest, ForEachInVisitsTheMembersOfARangeInOrder) {
  std::mt19937 rng(5);
  const uint64_t n = 1000;
  Frontier f(n, 1);
  std::set<VertexId> in;
  for (int k = 0; k < 40; ++k) {
    VertexId v = rng() % n;
    f.Add(0, v);
    in.insert(v);
  }
  f.Seal();
  for (int q = 0; q < 3000; ++q) {
    uint64_t a = rng() % (n + 1), b = rng() % (n + 1);
    if (a > b) std::swap(a, b);
    std::vector<VertexId> want(in.lower_bound(a), in.lower_bound(b));
    std::vector<VertexId> got;
    f.ForEachIn(a, b, [&](VertexId v) { got.push_back(v); });
    ASSERT_EQ(got, want) << a << " " << b;
  }
}

// What was computed for a prefix of vertices() under one epoch holds
// while the epoch does: members are only appended between Clears, and a
// frontier moved from or into takes a new one.
TEST(FrontierTest, TheEpochChangesWhenMembersStopBeingAPrefix) {
  Frontier f(100, 1);
  const uint64_t e0 = f.epoch();
  f.Add(0, 5);
  f.Seal();
  f.AddUnique(0, 7);
  f.Seal();
  EXPECT_EQ(f.epoch(), e0);  // appended
  Frontier other(100, 1);
  other.Add(0, 9);
  other.Seal();
  f.Merge(other);
  EXPECT_EQ(f.epoch(), e0);
  EXPECT_EQ(Members(f), (std::vector<VertexId>{5, 7, 9}));
  f.Clear();
  const uint64_t e1 = f.epoch();
  EXPECT_NE(e1, e0);
  Frontier moved(std::move(f));
  EXPECT_EQ(moved.epoch(), e1);
  EXPECT_NE(f.epoch(), e1);  // NOLINT(bugprone-use-after-move): reused
  const uint64_t e2 = other.epoch();
  f = std::move(other);
  EXPECT_EQ(f.epoch(), e2);
  EXPECT_NE(other.epoch(), e2);  // NOLINT(bugprone-use-after-move)
  EXPECT_NE(other.epoch(), e1);
}

// A partial frontier (several compute nodes: parts that came as counts)
// holds some members and counts the rest: size() and empty() are the whole
// frontier's; whole() is false even with nothing counted elsewhere, until
// it is empty or cleared; a move carries it; Merge keeps the mark.
TEST(FrontierTest, APartialFrontierCountsWhatItDoesNotHold) {
  Frontier f(1000, 1);
  f.Add(0, 7);
  f.Seal();
  EXPECT_TRUE(f.whole());
  f.AddElsewhere(5);
  EXPECT_FALSE(f.whole());
  EXPECT_EQ(f.size(), 6u);
  EXPECT_EQ(f.vertices().size(), 1u);
  EXPECT_FALSE(f.Contains(8));

  Frontier g(1000, 1);
  g.AddElsewhere(0);  // this node's part counted: partial all the same
  EXPECT_TRUE(g.empty());
  EXPECT_TRUE(g.whole());  // an empty frontier is whole
  g.Add(0, 9);
  g.Seal();
  EXPECT_FALSE(g.whole());
  EXPECT_EQ(g.size(), 1u);

  Frontier h = std::move(f);
  EXPECT_FALSE(h.whole());
  EXPECT_EQ(h.size(), 6u);
  const uint64_t epoch = h.epoch();
  h.Merge(g);  // held members joined; the count is Engine::Union's to set
  EXPECT_EQ(Members(h), (std::vector<VertexId>{7, 9}));
  EXPECT_FALSE(h.whole());
  EXPECT_NE(h.epoch(), epoch);  // what was kept for the old count is void
  h.SetTotal(10);
  EXPECT_EQ(h.size(), 10u);
  h.Clear();
  EXPECT_TRUE(h.whole());
  EXPECT_TRUE(h.empty());
}

TEST(FrontierTest, SparesComeBackEmpty) {
  auto spares = std::make_shared<FrontierSpares>();
  const uint64_t n = 5000;
  std::mt19937 rng(11);
  std::set<VertexId> previous;
  for (int round = 0; round < 20; ++round) {
    Frontier f(n, 2, spares);
    // Nothing of the previous frontier leaks into this one.
    for (VertexId v : previous) ASSERT_FALSE(f.Contains(v)) << round;
    EXPECT_TRUE(f.empty());
    previous.clear();
    for (int k = 0; k < 300; ++k) {
      // Each vertex enters once: AddUnique's contract (a claim won once).
      VertexId v = rng() % n;
      if (!previous.insert(v).second) continue;
      if (rng() % 2) {
        f.AddUnique(k % 2, v);
      } else {
        EXPECT_TRUE(f.Add(k % 2, v));
      }
    }
    if (round % 3 != 0) {
      f.Seal();
      EXPECT_EQ(f.size(), previous.size());
    }
    // Unsealed members (round % 3 == 0) must be cleared as well.
  }
}

TEST(FrontierTest, MoveAssignmentHandsTheOldStorageOn) {
  auto spares = std::make_shared<FrontierSpares>();
  Frontier a(300, 1, spares);
  a.Add(0, 7);
  a.Seal();
  Frontier b(300, 1, spares);
  b.Add(0, 9);
  b.Seal();
  a = std::move(b);
  EXPECT_EQ(Members(a), (std::vector<VertexId>{9}));
  Frontier c(300, 1, spares);  // gets a's old storage, cleared
  EXPECT_FALSE(c.Contains(7));
  EXPECT_TRUE(c.empty());
}

}  // namespace
}  // namespace dmg::compute
