// Comparing an engine's result with the reference, and formatting values,
// for `dmg run --verify`, `--output` and the tests.
#ifndef DMG_REFERENCE_COMPARE_H_
#define DMG_REFERENCE_COMPARE_H_

#include <cstdint>
#include <span>
#include <string>

namespace dmg::reference {

// What a comparison found. When `any` is false the other fields (except l1
// for CompareL1) are empty/zero.
struct Mismatch {
  bool any = false;
  uint64_t vertex = 0;   // first differing vertex (largest difference: L1)
  uint64_t count = 0;    // differing vertices (exact comparisons)
  std::string expected;  // reference value at `vertex`, formatted
  std::string actual;    // compared value at `vertex`, formatted
  std::string message;   // one line for humans
  double l1 = 0.0;       // CompareL1 only: the L1 distance
};

// Values as written to --output files and messages:
//   int32 (BFS depth): decimal, unreached stays -1;
//   uint32 (CC label): decimal;
//   int64 (SSSP distance): decimal, kInfDistance prints "inf";
//   double (PageRank): shortest text that reads back to the same double.
std::string FormatValue(int32_t value);
std::string FormatValue(uint32_t value);
std::string FormatValue(int64_t value);
std::string FormatValue(double value);

// Exact comparisons reporting the first differing vertex (or a length
// mismatch, reported at the shorter length).
Mismatch CompareExact(std::span<const int32_t> expected,
                      std::span<const int32_t> actual);
Mismatch CompareExact(std::span<const uint32_t> expected,
                      std::span<const uint32_t> actual);
Mismatch CompareExact(std::span<const int64_t> expected,
                      std::span<const int64_t> actual);

// sum_v |a(v) - b(v)|; NaN if any difference is NaN; the sizes must agree
// (else +infinity).
double L1Distance(std::span<const double> a, std::span<const double> b);

// Mismatch unless the sizes agree and L1Distance(expected, actual) <=
// tolerance; reports the vertex with the largest difference (a NaN counts as
// largest) and fills l1 in either case.
Mismatch CompareL1(std::span<const double> expected,
                   std::span<const double> actual, double tolerance);

// Mismatch unless the sizes agree and every |expected - actual| <=
// relative * max(|expected|, |actual|) (exact zeros must match, NaN never
// does); reports the first vertex that fails. For scores that are summed in
// different orders (betweenness centrality).
Mismatch CompareRelative(std::span<const double> expected,
                         std::span<const double> actual, double relative);

// Exact comparison of single counts (triangle counting).
Mismatch CompareCount(uint64_t expected, uint64_t actual);

}  // namespace dmg::reference

#endif  // DMG_REFERENCE_COMPARE_H_
