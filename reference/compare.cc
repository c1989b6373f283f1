#include "reference/compare.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "reference/reference.h"

namespace dmg::reference {
namespace {

Mismatch LengthMismatch(uint64_t expected, uint64_t actual) {
  Mismatch m;
  m.any = true;
  m.vertex = std::min(expected, actual);
  m.count = std::max(expected, actual) - m.vertex;
  m.message = absl::StrCat("expected ", expected, " values, got ", actual);
  return m;
}

template <typename T>
Mismatch CompareExactImpl(std::span<const T> expected,
                          std::span<const T> actual) {
  if (expected.size() != actual.size()) {
    return LengthMismatch(expected.size(), actual.size());
  }
  Mismatch m;
  for (uint64_t v = 0; v < expected.size(); ++v) {
    if (expected[v] == actual[v]) continue;
    if (!m.any) {
      m.any = true;
      m.vertex = v;
      m.expected = FormatValue(expected[v]);
      m.actual = FormatValue(actual[v]);
    }
    ++m.count;
  }
  if (m.any) {
    m.message = absl::StrCat("vertex ", m.vertex, ": expected ", m.expected,
                             ", got ", m.actual, " (", m.count, " of ",
                             expected.size(), " vertices differ)");
  }
  return m;
}

}  // namespace

std::string FormatValue(int32_t value) { return absl::StrCat(value); }
std::string FormatValue(uint32_t value) { return absl::StrCat(value); }

std::string FormatValue(int64_t value) {
  if (value == kInfDistance) return "inf";
  return absl::StrCat(value);
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  if (ec != std::errc()) return absl::StrFormat("%.17g", value);
  return std::string(buffer, end);
}

Mismatch CompareExact(std::span<const int32_t> expected,
                      std::span<const int32_t> actual) {
  return CompareExactImpl(expected, actual);
}
Mismatch CompareExact(std::span<const uint32_t> expected,
                      std::span<const uint32_t> actual) {
  return CompareExactImpl(expected, actual);
}
Mismatch CompareExact(std::span<const int64_t> expected,
                      std::span<const int64_t> actual) {
  return CompareExactImpl(expected, actual);
}

double L1Distance(std::span<const double> a, std::span<const double> b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double l1 = 0.0;
  for (uint64_t v = 0; v < a.size(); ++v) l1 += std::abs(a[v] - b[v]);
  return l1;
}

Mismatch CompareL1(std::span<const double> expected,
                   std::span<const double> actual, double tolerance) {
  if (expected.size() != actual.size()) {
    Mismatch m = LengthMismatch(expected.size(), actual.size());
    m.l1 = std::numeric_limits<double>::infinity();
    return m;
  }
  Mismatch m;
  m.l1 = L1Distance(expected, actual);
  if (m.l1 <= tolerance || expected.empty()) return m;  // false for NaN
  double largest = -1.0;
  for (uint64_t v = 0; v < expected.size(); ++v) {
    double diff = std::abs(expected[v] - actual[v]);
    if (std::isnan(diff)) {
      m.vertex = v;
      break;
    }
    if (diff > largest) {
      largest = diff;
      m.vertex = v;
    }
  }
  m.any = true;
  m.count = 0;
  for (uint64_t v = 0; v < expected.size(); ++v) {
    if (!(expected[v] == actual[v])) ++m.count;
  }
  m.expected = FormatValue(expected[m.vertex]);
  m.actual = FormatValue(actual[m.vertex]);
  m.message =
      absl::StrCat("L1 distance ", FormatValue(m.l1), " exceeds tolerance ",
                   FormatValue(tolerance), "; largest difference at vertex ",
                   m.vertex, ": expected ", m.expected, ", got ", m.actual);
  return m;
}

Mismatch CompareRelative(std::span<const double> expected,
                         std::span<const double> actual, double relative) {
  if (expected.size() != actual.size()) {
    return LengthMismatch(expected.size(), actual.size());
  }
  Mismatch m;
  for (uint64_t v = 0; v < expected.size(); ++v) {
    const double a = expected[v], b = actual[v];
    if (std::abs(a - b) <= relative * std::max(std::abs(a), std::abs(b))) {
      continue;  // false for NaN
    }
    if (!m.any) {
      m.any = true;
      m.vertex = v;
      m.expected = FormatValue(a);
      m.actual = FormatValue(b);
    }
    ++m.count;
  }
  if (m.any) {
    m.message =
        absl::StrCat(m.count, " vertices differ by more than ",
                     FormatValue(relative), " relative; first at vertex ",
                     m.vertex, ": expected ", m.expected, ", got ", m.actual);
  }
  return m;
}

Mismatch CompareCount(uint64_t expected, uint64_t actual) {
  Mismatch m;
  if (expected == actual) return m;
  m.any = true;
  m.count = 1;
  m.expected = absl::StrCat(expected);
  m.actual = absl::StrCat(actual);
  m.message = absl::StrCat("expected ", expected, ", got ", actual);
  return m;
}

}  // namespace dmg::reference
