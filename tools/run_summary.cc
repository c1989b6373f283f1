#include "tools/run_summary.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace dmg::cli {
namespace {

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      absl::StrAppend(&out, "\\", std::string(1, static_cast<char>(c)));
    } else if (c < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out + "\"";
}

// Seconds with enough digits for microsecond runs; JSON has no NaN or inf.
std::string Number(double x) {
  if (!(x == x) || x > 1e300 || x < -1e300) return "null";
  return absl::StrFormat("%.9g", x);
}

std::string SpreadJson(const Spread& s) {
  return absl::StrFormat(
      R"({"average": %s, "median": %s, "min": %s, "max": %s})",
      Number(s.average), Number(s.median), Number(s.min), Number(s.max));
}

std::string TrialJson(const TrialSummary& t) {
  std::string out = absl::StrFormat(
      R"({"trial": %d, "source": %s)", t.trial,
      t.sources.empty() ? std::string("null") : absl::StrCat(t.sources[0]));
  if (t.sources.size() > 1) {
    absl::StrAppend(&out, R"(, "sources": [)", absl::StrJoin(t.sources, ", "),
                    "]");
  }
  absl::StrAppendFormat(
      &out,
      R"(, "seconds": %s, "supersteps": %d, "bytes_read": %d, )"
      R"("bytes_written": %d, "round_trips": %d, "cache_hits": %d, )"
      R"("cache_misses": %d, "cache_bytes_fetched": %d)",
      Number(t.seconds), t.supersteps, t.remote.bytes_read,
      t.remote.bytes_written, t.remote.round_trips, t.cache.hits,
      t.cache.misses, t.cache.bytes_fetched);
  for (const auto& [name, value] : t.counts) {
    absl::StrAppend(&out, ", ", Quote(name), ": ", value);
  }
  if (t.converged.has_value()) {
    absl::StrAppend(&out, R"(, "converged": )",
                    *t.converged ? "true" : "false");
  }
  return out + "}";
}

}  // namespace

Spread SpreadOf(std::vector<double> values) {
  Spread s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  s.min = values.front();
  s.max = values.back();
  s.average = std::accumulate(values.begin(), values.end(), 0.0) / n;
  s.median =
      n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return s;
}

std::string ToJson(const RunSummary& r) {
  std::vector<std::string> addresses, trials;
  for (const std::string& a : r.memory_node_addresses) {
    addresses.push_back(Quote(a));
  }
  std::vector<double> seconds;
  uint64_t bytes_read = 0, bytes_written = 0;
  for (const TrialSummary& t : r.trials) {
    trials.push_back("    " + TrialJson(t));
    seconds.push_back(t.seconds);
    bytes_read += t.remote.bytes_read;
    bytes_written += t.remote.bytes_written;
  }
  std::string out = "{\n";
  absl::StrAppend(&out, R"(  "format": "dmg-summary-1",)", "\n");
  absl::StrAppend(&out, R"(  "version": )", Quote(r.version), ",\n");
  absl::StrAppend(&out, R"(  "graph": )", Quote(r.graph), ",\n");
  absl::StrAppend(&out, R"(  "graph_source": )", Quote(r.graph_source), ",\n");
  absl::StrAppend(&out, R"(  "graph_digest": )", Quote(r.graph_digest), ",\n");
  absl::StrAppend(&out, R"(  "algorithm": )", Quote(r.algorithm), ",\n");
  if (!r.precision.empty()) {
    absl::StrAppend(&out, R"(  "precision": )", Quote(r.precision), ",\n");
  }
  absl::StrAppend(&out, R"(  "transport": )", Quote(r.transport), ",\n");
  absl::StrAppendFormat(&out,
                        R"(  "memory_nodes": %d,)"
                        "\n",
                        r.memory_nodes);
  absl::StrAppend(&out, R"(  "memory_node_addresses": [)",
                  absl::StrJoin(addresses, ", "), "],\n");
  absl::StrAppendFormat(&out,
                        R"(  "compute_nodes": %d,)"
                        "\n"
                        R"(  "threads": %d,)"
                        "\n"
                        R"(  "vertices": %d,)"
                        "\n"
                        R"(  "arcs": %d,)"
                        "\n",
                        r.compute_nodes, r.threads, r.vertices, r.arcs);
  absl::StrAppend(&out, R"(  "load_seconds": )", Number(r.load_seconds), ",\n");
  absl::StrAppendFormat(
      &out,
      R"(  "cache": {"policy": %s, "bound_bytes": %d, "peak_bytes": %d},)"
      "\n",
      Quote(r.cache_policy), r.cache_bound_bytes, r.cache_peak_bytes);
  absl::StrAppend(&out, R"(  "trials": [)", "\n", absl::StrJoin(trials, ",\n"),
                  "\n  ],\n");
  absl::StrAppend(&out, R"(  "seconds": )", SpreadJson(SpreadOf(seconds)),
                  ",\n");
  absl::StrAppendFormat(&out,
                        R"(  "bytes_read": %d,)"
                        "\n"
                        R"(  "bytes_written": %d,)"
                        "\n",
                        bytes_read, bytes_written);
  absl::StrAppendFormat(&out,
                        R"(  "gpu": {"mode": %s, "used": %s, "note": %s},)"
                        "\n",
                        Quote(r.gpu_mode), r.gpu_used ? "true" : "false",
                        Quote(r.gpu_note));
  absl::StrAppend(&out, R"(  "verify": )", Quote(r.verify), "\n}\n");
  return out;
}

}  // namespace dmg::cli
