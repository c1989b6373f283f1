#include "compute_node/run_stats.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dmg::compute {
namespace {

std::string OpsJson(const transport::OpStats& o) {
  return absl::StrFormat(
      "{\"reads\": %d, \"writes\": %d, \"atomics\": %d, \"cas\": %d, "
      "\"faa\": %d, \"bytes_read\": %d, \"bytes_written\": %d, "
      "\"round_trips\": %d}",
      o.reads, o.writes, o.atomics(), o.cas, o.faa, o.bytes_read,
      o.bytes_written, o.round_trips);
}

std::string CacheJson(const CacheCounters& c) {
  return absl::StrFormat(
      "{\"hits\": %d, \"misses\": %d, \"evictions\": %d, \"writebacks\": "
      "%d, \"bytes_fetched\": %d, \"bytes_saved\": %d}",
      c.hits, c.misses, c.evictions, c.writebacks, c.bytes_fetched,
      c.bytes_saved);
}

// A JSON string's body (the GPU's note quotes error messages).
std::string Escaped(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<int>(ch));
    } else {
      out += ch;
    }
  }
  return out;
}

std::string GpuJson(const GpuStats& g) {
  return absl::StrFormat(
      "{\"used\": %s, \"note\": \"%s\", \"cpu_units\": %.0f, "
      "\"cpu_seconds\": %.6f, \"gpu_units\": %.0f, \"gpu_seconds\": %.6f, "
      "\"cpu_rate\": %.1f, \"gpu_rate\": %.1f, \"share\": %.4f, "
      "\"begin\": %d, \"cut\": %d, \"end\": %d, \"upload_edges\": %d, "
      "\"upload_bytes_read\": %d, \"pulls\": %d, \"kernel_seconds\": %.6f, "
      "\"copy_seconds\": %.6f, \"wait_seconds\": %.6f, "
      "\"bottom_up_steps\": %d}",
      g.used ? "true" : "false", Escaped(g.note), g.cpu_units, g.cpu_seconds,
      g.gpu_units, g.gpu_seconds, g.cpu_rate, g.gpu_rate, g.share, g.begin,
      g.cut, g.end, g.upload_edges, g.upload_bytes_read, g.pulls,
      g.kernel_seconds, g.copy_seconds, g.wait_seconds, g.bottom_up_steps);
}

uint64_t StatusField(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) {
      return std::stoull(line.substr(std::string(key).size())) * 1024;
    }
  }
  return 0;
}

}  // namespace

uint64_t CurrentRssBytes() { return StatusField("VmRSS:"); }
uint64_t PeakRssBytes() { return StatusField("VmHWM:"); }

std::string ToJson(const RunStats& s) {
  std::string out = absl::StrFormat(
      "{\n  \"algorithm\": \"%s\",\n  \"transport\": \"%s\",\n  \"threads\": "
      "%d,\n  \"vertices\": %d,\n  \"arcs\": %d,\n  \"seconds\": %.6f,\n  "
      "\"setup_seconds\": %.6f,\n  \"finish_seconds\": %.6f,\n  "
      "\"directory_bytes\": %d,\n  \"cache_policy\": \"%s\",\n  "
      "\"cache_capacity_bytes\": %d,\n  \"cache_peak_bytes\": %d,\n  "
      "\"rss_start_bytes\": %d,\n  \"rss_peak_bytes\": %d,\n  "
      "\"setup\": %s,\n  \"supersteps\": [",
      s.algorithm, s.transport, s.threads, s.vertices, s.arcs, s.seconds,
      s.setup_seconds, s.finish_seconds, s.directory_bytes, s.cache_policy,
      s.cache_capacity_bytes, s.cache_peak_bytes, s.rss_start_bytes,
      s.rss_peak_bytes, OpsJson(s.setup));
  for (size_t i = 0; i < s.supersteps.size(); ++i) {
    const SuperstepStats& t = s.supersteps[i];
    absl::StrAppendFormat(
        &out,
        "%s\n    {\"index\": %d, \"direction\": \"%s\", \"frontier\": %d, "
        "\"seconds\": %.6f, \"max_outstanding\": %d, \"ops\": %s, "
        "\"cache\": %s, \"chosen_by\": \"%s\", \"auto_work\": %d, "
        "\"auto_threshold\": %d, \"update_mode\": \"%s\", "
        "\"update_chosen_by\": \"%s\", \"est_remote_updates\": %d, "
        "\"est_batch_us\": %.1f, \"est_atomic_us\": %.1f, "
        "\"stolen_items\": %d, \"steal\": \"%s\", \"steal_max_work\": "
        "%.0f, \"steal_mean_work\": %.0f, \"est_pull_us\": %.1f, "
        "\"est_push_us\": %.1f, \"est_pull_bytes\": %.0f, "
        "\"est_push_bytes\": %.0f, \"refresh\": \"%s\", "
        "\"pending_lines\": %d, \"remote_share\": %.4f, "
        "\"est_refresh_touches\": %.0f, \"est_bulk_refresh_us\": %.1f, "
        "\"est_demand_refresh_us\": %.1f, \"push_arcs\": %d, "
        "\"remote_arcs\": %d, \"pull_visits\": %d, \"pull_hits\": %d, "
        "\"gather_visits\": %d, "
        "\"vertex_visits\": %d, \"rounds\": %d, "
        "\"wait_seconds\": %.6f, \"est_steal_gain_us\": %.1f, "
        "\"est_steal_cost_us\": %.1f, \"est_steal_residue_ns\": %.2f, "
        "\"checkpoint\": %s, \"path_round_trips\": %d, "
        "\"est_push_remote_share\": %.4f, \"est_stale_refresh_us\": %.1f, "
        "\"polls\": %d}",
        i ? "," : "", t.index, t.direction, t.frontier, t.seconds,
        t.max_outstanding, OpsJson(t.ops), CacheJson(t.cache), t.chosen_by,
        t.auto_work, t.auto_threshold, t.update_mode, t.update_chosen_by,
        t.est_remote_updates, t.est_batch_us, t.est_atomic_us, t.stolen_items,
        t.steal, t.steal_max_work, t.steal_mean_work, t.est_pull_us,
        t.est_push_us, t.est_pull_bytes, t.est_push_bytes, t.refresh,
        t.pending_lines, t.remote_share, t.est_refresh_touches,
        t.est_bulk_refresh_us, t.est_demand_refresh_us, t.push_arcs,
        t.remote_arcs, t.pull_visits, t.pull_hits, t.gather_visits,
        t.vertex_visits, t.rounds, t.wait_seconds, t.est_steal_gain_us,
        t.est_steal_cost_us, t.est_steal_residue_ns,
        t.checkpoint ? "true" : "false", t.path_round_trips,
        t.est_push_remote_share, t.est_stale_refresh_us, t.polls);
  }
  absl::StrAppendFormat(&out,
                        "\n  ],\n  \"totals\": %s,\n  \"cache_totals\": "
                        "%s,\n  \"compute_nodes\": %d,\n  \"job\": \"%s\",\n"
                        "  \"transport_rtt_us\": %.2f,\n"
                        "  \"transport_bytes_per_us\": %.1f,\n"
                        "  \"cost_constants\": \"%s\",\n"
                        "  \"job_totals\": %s,\n  \"gpu\": %s,\n"
                        "  \"nodes\": [",
                        OpsJson(s.total), CacheJson(s.total_cache),
                        s.compute_nodes, s.job, s.transport_rtt_us,
                        s.transport_bytes_per_us, s.cost_constants,
                        OpsJson(s.job_total), GpuJson(s.gpu));
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    const NodeStats& n = s.nodes[i];
    absl::StrAppendFormat(
        &out,
        "%s\n    {\"id\": %d, \"own_begin\": %d, \"own_end\": %d, "
        "\"seconds\": %.6f, \"wait_seconds\": %.6f, \"busy_seconds\": "
        "%.6f, \"rounds\": %d, \"poll_round_trips\": %d, \"own_items\": "
        "%d, \"stolen_items\": %d, \"completed_frontiers\": %d, \"ops\": "
        "%s}",
        i ? "," : "", n.id, n.own_begin, n.own_end, n.seconds, n.wait_seconds,
        n.seconds - n.wait_seconds, n.rounds, n.polls, n.own_items,
        n.stolen_items, n.completed_frontiers, OpsJson(n.total));
  }
  absl::StrAppend(&out, s.nodes.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return out;
}

}  // namespace dmg::compute
