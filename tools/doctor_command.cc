#include "tools/doctor_command.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gflags/gflags.h"
#include "tools/cli.h"
#include "tools/status_command.h"
#include "transport/rdma/rdma_probe.h"
#include "transport/tcp_transport.h"

#ifdef DMG_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

DECLARE_uint64(rdma_staging_bytes);
DECLARE_string(memory_nodes);
DECLARE_string(transport);
DECLARE_int32(threads);
DECLARE_uint64(memory_mb);
DECLARE_string(rdma_device);

namespace dmg::cli {
namespace {

namespace rdma = transport::rdma;

constexpr char kSoftRoceFix[] =
    "soft-RoCE on a kernel with rdma_rxe: sudo deploy/softroce-setup.sh up; "
    "a RoCE/InfiniBand NIC: load its driver (e.g. modprobe mlx5_ib); a kernel "
    "without rdma_rxe: the qemu VM route (docs/DEPLOY.md, "
    "deploy/softroce/README.md); or run with --transport=tcp";

enum class Level { kOk, kWarn, kFail };

// The printed report: sections, then lines with a level, details and fixes.
class Report {
 public:
  void Section(const std::string& title) {
    std::printf("\n== %s\n", title.c_str());
  }
  void Line(Level level, const std::string& text) {
    const char* tag = "OK  ";
    if (level == Level::kWarn) {
      tag = "WARN";
      ++warnings_;
    } else if (level == Level::kFail) {
      tag = "FAIL";
      ++failures_;
    }
    std::printf("  %s  %s\n", tag, text.c_str());
  }
  void Detail(const std::string& text) {
    std::printf("        %s\n",
                std::string(absl::StripTrailingAsciiWhitespace(text)).c_str());
  }
  void Fix(const std::string& text) {
    std::printf("        fix: %s\n", text.c_str());
  }
  int failures() const { return failures_; }
  int warnings() const { return warnings_; }

 private:
  int failures_ = 0;
  int warnings_ = 0;
};

std::string ReadFileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> DevNodes(const std::string& dir,
                                  const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (absl::StartsWith(name, prefix)) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Whether a port can carry dmg's rdma transport.
bool PortUsable(const rdma::PortInfo& p) {
  return p.active && (!p.ethernet || p.roce_v2_ipv4_gid_index >= 0);
}

// The devices sysfs lists (each opened with libibverbs when it can be):
// those --rdma_device allows and libibverbs opens are the candidates.
std::vector<const rdma::DeviceInfo*> CheckDevices(
    Report& report, Level rdma_level, const rdma::ProbeResult& probe) {
  std::vector<const rdma::DeviceInfo*> candidates;
  for (const rdma::DeviceInfo& d : probe.devices) {
    std::string ports = absl::StrJoin(
        d.ports, ", ", [](std::string* out, const rdma::PortInfo& p) {
          absl::StrAppend(out, "port ", p.port, " ", p.state);
        });
    std::string text = absl::StrFormat(
        "%s: %s%s, %d port(s) (%s)", d.name, d.node_type,
        d.fw_ver.empty() ? "" : ", fw " + d.fw_ver, d.ports.size(), ports);
    if (!FLAGS_rdma_device.empty() && d.name != FLAGS_rdma_device) {
      report.Line(Level::kOk, text + " (not --rdma_device, skipped)");
      continue;
    }
    if (d.verbs_checked && !d.verbs_open) {
      report.Line(rdma_level,
                  text + ": libibverbs cannot open it: " + d.verbs_error);
      report.Fix(
          "install the user-space providers (Debian: sudo apt install "
          "ibverbs-providers libibverbs1 librdmacm1) and check "
          "/dev/infiniband permissions");
      continue;
    }
    report.Line(Level::kOk, text);
    candidates.push_back(&d);
  }
  for (const std::string& e : probe.sysfs_errors) report.Detail("note: " + e);
  if (!FLAGS_rdma_device.empty() && candidates.empty()) {
    std::vector<std::string> names;
    for (const rdma::DeviceInfo& d : probe.devices) names.push_back(d.name);
    report.Line(rdma_level,
                absl::StrFormat("no usable device named '%s' (--rdma_device); "
                                "this host has: %s",
                                FLAGS_rdma_device, absl::StrJoin(names, ", ")));
  }

  return candidates;
}

// A port dmg's rdma transport can use, and the GID it would take.
struct Choice {
  std::string device;
  int port;
  const rdma::GidEntry* gid;
  bool infiniband;
};

// Each candidate's ports and GIDs; the ports an rdma run can use.
std::vector<Choice> CheckPorts(Report& report,
                               const std::vector<const rdma::DeviceInfo*>& candidates,
                               const rdma::ProbeResult& probe) {
  report.Section("RDMA ports and GIDs");
  std::vector<Choice> choices;
  for (const rdma::DeviceInfo* d : candidates) {
    for (const rdma::PortInfo& p : d->ports) {
      std::string mtu = p.active_mtu > 0
                            ? absl::StrFormat(", active MTU %d (max %d)",
                                              p.active_mtu, p.max_mtu)
                            : (probe.verbs_built ? ", active MTU unknown" : "");
      std::string head =
          absl::StrFormat("%s port %d: %s (%s), link layer %s%s", d->name,
                          p.port, p.state, p.phys_state, p.link_layer, mtu);
      const bool ok = PortUsable(p);
      report.Line(ok ? Level::kOk : Level::kWarn, head);
      for (const rdma::GidEntry& g : p.gids) {
        report.Detail(absl::StrFormat(
            "gid[%d] %-40s %-8s %-10s%s%s", g.index, g.address,
            rdma::GidTypeName(g.type), g.netdev.empty() ? "-" : g.netdev,
            g.ipv4_mapped ? " IPv4 " + g.ipv4 : "",
            g.index == p.roce_v2_ipv4_gid_index ? "   <- dmg uses this one"
                                                : ""));
      }
      if (p.gids.empty()) report.Detail("no GIDs");
      if (!p.active) {
        report.Fix(absl::StrFormat(
            "the port is %s: bring its netdev up (ip link set IF up), check "
            "the cable/switch (InfiniBand: is a subnet manager running?)",
            p.state));
      } else if (p.ethernet && p.roce_v2_ipv4_gid_index < 0) {
        report.Fix(
            "no RoCE v2 GID with an IPv4-mapped address: give the port's "
            "netdev an IPv4 address (ip addr add A.B.C.D/24 dev IF); dmg "
            "connects over IPv4");
      }
      if (ok) {
        const rdma::GidEntry* gid = nullptr;
        for (const rdma::GidEntry& g : p.gids) {
          if (g.index == p.roce_v2_ipv4_gid_index) gid = &g;
        }
        choices.push_back({d->name, p.port, gid, !p.ethernet});
      }
    }
  }

  return choices;
}

// Which GID index dmg (and other RDMA tools) should take on each port.
void ReportGidChoices(Report& report, Level rdma_level,
                      const std::vector<Choice>& choices) {
  report.Section("GID index to use");
  if (choices.empty()) {
    report.Line(rdma_level,
                "no device has an active port with a usable GID (see above)");
    report.Fix(kSoftRoceFix);
  }
  for (const Choice& c : choices) {
    if (c.infiniband) {
      report.Line(Level::kOk,
                  absl::StrFormat("%s port %d is InfiniBand: GID index 0; "
                                  "nothing to choose",
                                  c.device, c.port));
      continue;
    }
    report.Line(Level::kOk,
                absl::StrFormat("%s port %d: GID index %d (%s, RoCE v2, IPv4 "
                                "%s on %s)",
                                c.device, c.port, c.gid->index, c.gid->address,
                                c.gid->ipv4, c.gid->netdev));
    report.Detail(absl::StrFormat(
        "dmg finds it itself (--rdma_gid_index=-1, the default) when "
        "memory nodes listen on %s; other tools: ib_write_bw -x %d, "
        "ibv_rc_pingpong -g %d",
        c.gid->ipv4, c.gid->index, c.gid->index));
  }

}

// libibverbs and the device nodes dmg opens. Whether they are all there.
bool CheckUserSpace(Report& report, Level rdma_level,
                    const rdma::ProbeResult& probe) {
  bool usable = true;
  report.Section("RDMA user space (libibverbs, /dev/infiniband)");
  if (!probe.verbs_built) {
    report.Line(rdma_level,
                "this dmg was built without libibverbs-dev/librdmacm-dev: "
                "--transport=rdma is not available");
    report.Fix(
        "sudo apt install libibverbs-dev librdmacm-dev (or bash "
        "deploy/install-deps.sh), then reconfigure and rebuild");
    usable = false;
  } else {
    report.Line(
        probe.verbs_devices > 0 ? Level::kOk : rdma_level,
        absl::StrFormat("libibverbs lists %d device(s)", probe.verbs_devices));
  }
  if (probe.uverbs_nodes.empty()) {
    report.Line(rdma_level,
                absl::StrFormat("no %s/uverbs* device nodes", rdma::kDevRoot));
    report.Fix("sudo modprobe ib_uverbs");
    usable = false;
  } else {
    report.Line(Level::kOk,
                absl::StrFormat("%s: %s", rdma::kDevRoot,
                                absl::StrJoin(probe.uverbs_nodes, " ")));
  }
  if (!probe.rdma_cm_node) {
    report.Line(rdma_level,
                absl::StrFormat("no %s/rdma_cm: the connection manager dmg "
                                "uses is not loaded",
                                rdma::kDevRoot));
    report.Fix("sudo modprobe rdma_ucm");
    usable = false;
  } else {
    report.Line(Level::kOk, absl::StrFormat("%s/rdma_cm present (rdma_ucm)",
                                            rdma::kDevRoot));
  }
  return usable;
}

// RDMA sections. Returns whether a usable device/port/GID was found (with a
// verbs user space that can open it). `rdma_level` is the level of
// problems that stop an rdma run (FAIL, or WARN under --transport=tcp).
bool CheckRdma(Report& report, Level rdma_level) {
  const rdma::ProbeResult probe = rdma::ProbeRdma();
  report.Section("RDMA devices (" + std::string(rdma::kSysfsRoot) + ")");
  if (!probe.sysfs_present) {
    report.Line(rdma_level,
                absl::StrFormat("no RDMA support in the running kernel: %s "
                                "does not exist",
                                rdma::kSysfsRoot));
    report.Fix(kSoftRoceFix);
    return false;
  }
  if (probe.devices.empty()) {
    report.Line(rdma_level,
                "the kernel's RDMA core is loaded but there is no RDMA device");
    report.Fix(kSoftRoceFix);
    return false;
  }
  const std::vector<const rdma::DeviceInfo*> candidates =
      CheckDevices(report, rdma_level, probe);
  const std::vector<Choice> choices = CheckPorts(report, candidates, probe);
  ReportGidChoices(report, rdma_level, choices);
  const bool user_space = CheckUserSpace(report, rdma_level, probe);
  return !choices.empty() && user_space;
}

// Locked memory: what the limit is against what dmg registers.
bool CheckMemlock(Report& report, Level rdma_level) {
  report.Section("locked memory (RLIMIT_MEMLOCK)");
  rlimit lim{};
  getrlimit(RLIMIT_MEMLOCK, &lim);
  const uint64_t soft =
      lim.rlim_cur == RLIM_INFINITY ? ~uint64_t{0} : lim.rlim_cur;
  const uint64_t hard =
      lim.rlim_max == RLIM_INFINITY ? ~uint64_t{0} : lim.rlim_max;
  const int threads =
      FLAGS_threads > 0
          ? FLAGS_threads
          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const uint64_t compute = ComputeNodeMemlockBytes(threads);
  const uint64_t memory = FLAGS_memory_mb << 20;
  const uint64_t need = std::max(compute, memory);
  const bool cap = HasCapIpcLock(ReadFileText("/proc/self/status"));
  std::string limits = absl::StrFormat("soft limit %s, hard limit %s",
                                       BytesText(soft), BytesText(hard));
  std::string needs = absl::StrFormat(
      "a compute node with %d worker thread(s) registers %s (%d x %s "
      "staging)",
      threads, BytesText(compute), threads + 1,
      BytesText(FLAGS_rdma_staging_bytes));
  if (memory > 0) {
    needs += absl::StrFormat("; a memory node with --memory_mb=%d up to %s",
                             FLAGS_memory_mb, BytesText(memory));
  }
  if (cap) {
    report.Line(Level::kOk,
                limits +
                    "; this process has CAP_IPC_LOCK, so the limit does "
                    "not bind verbs registrations");
    report.Detail(needs);
    report.Detail(
        "(daemons started as another user, or without the capability, "
        "still need the limit raised)");
    return true;
  }
  if (soft >= need) {
    report.Line(Level::kOk, limits + ": enough");
    report.Detail(needs);
    if (soft != ~uint64_t{0} && memory == 0) {
      report.Detail(
          "a memory node registers every region it holds (the store, job "
          "regions); give --memory_mb=N to check for one, or make it "
          "unlimited");
    }
    return true;
  }
  report.Line(rdma_level, limits + ": too low");
  report.Detail(needs);
  report.Fix(absl::StrFormat(
      "%s in the shell that starts dmg; for good: a line '* - memlock "
      "unlimited' in /etc/security/limits.d/90-dmg-memlock.conf (log in "
      "again); systemd units: LimitMEMLOCK=infinity; containers: docker run "
      "--ulimit memlock=-1",
      hard == ~uint64_t{0}
          ? std::string("ulimit -l unlimited")
          : absl::StrFormat("raise the hard limit (now %s) as root, then "
                            "ulimit -l unlimited",
                            BytesText(hard))));
  return false;
}

void CheckHugePages(Report& report) {
  report.Section("huge pages (/proc/meminfo)");
  const HugePages h = ParseMeminfo(ReadFileText("/proc/meminfo"));
  const uint64_t want = FLAGS_rdma_staging_bytes;
  const std::string text =
      absl::StrFormat("%d reserved, %d free, page size %s", h.total, h.free,
                      BytesText(h.page_bytes));
  if (h.page_bytes > 0 && h.free * h.page_bytes >= want) {
    report.Line(Level::kOk,
                text + ": staging buffers get huge pages while they last");
  } else {
    report.Line(Level::kWarn,
                text +
                    ": staging buffers use ordinary pages (works; huge "
                    "pages are optional)");
    report.Fix(
        "optional: echo 64 | sudo tee /proc/sys/vm/nr_hugepages (2 MiB "
        "pages; about 8 MiB per compute worker thread)");
  }
}

void CheckCuda(Report& report) {
  report.Section("CUDA");
  const std::vector<std::string> nodes = DevNodes("/dev", "nvidia");
  const std::string dev_text = nodes.empty()
                                   ? std::string("no /dev/nvidia* device nodes")
                                   : "/dev: " + absl::StrJoin(nodes, " ");
#ifdef DMG_HAVE_CUDA
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess && nodes.empty()) {
    report.Line(Level::kOk,
                absl::StrFormat("built with CUDA; no GPU here (%s; %s)",
                                cudaGetErrorString(err), dev_text));
    return;
  }
  if (err != cudaSuccess) {
    report.Line(Level::kWarn,
                absl::StrFormat("built with CUDA, but cudaGetDeviceCount: %s "
                                "(%s)",
                                cudaGetErrorString(err), dev_text));
    report.Fix("check the NVIDIA driver (nvidia-smi)");
    return;
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  report.Line(Level::kOk,
              absl::StrFormat("built with CUDA: %d device(s), driver %d, "
                              "runtime %d",
                              n, driver, runtime));
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    report.Detail(absl::StrFormat("cuda:%d %s, compute %d.%d, %s", i, prop.name,
                                  prop.major, prop.minor,
                                  BytesText(prop.totalGlobalMem)));
  }
#else
  if (nodes.empty()) {
    report.Line(Level::kOk, "built without CUDA; " + dev_text);
  } else {
    report.Line(Level::kWarn,
                "built without CUDA, but this host has NVIDIA devices (" +
                    dev_text + ")");
    report.Fix(
        "install the CUDA toolkit (nvcc) and reconfigure (cmake --preset "
        "release -DDMG_CUDA=ON) to use them");
  }
#endif
}

// Every given memory node must answer on the control plane.
bool CheckMemoryNodes(Report& report,
                      const std::vector<transport::HostPort>& nodes,
                      const std::string& transport) {
  report.Section("memory nodes (--memory_nodes)");
  if (nodes.empty()) {
    report.Line(Level::kOk,
                "none given (dmg doctor --memory_nodes=H:P,... asks each)");
    return true;
  }
  bool all = true;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    MemoryNodeStatus st = AskMemoryNode(nodes[i], i);
    report.Line(st.up ? Level::kOk : Level::kFail, st.line);
    if (!st.up) {
      report.Fix(absl::StrFormat(
          "start it (dmg memory-node --listen=%s --transport=%s), or check "
          "the address and the firewall (the control plane is TCP)",
          nodes[i].ToString(), transport));
      all = false;
    }
  }
  return all;
}

}  // namespace

HugePages ParseMeminfo(const std::string& meminfo) {
  HugePages h;
  for (absl::string_view line : absl::StrSplit(meminfo, '\n')) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 2) continue;
    uint64_t v = 0;
    if (!absl::SimpleAtoi(f[1], &v)) continue;
    if (f[0] == "HugePages_Total:") h.total = v;
    if (f[0] == "HugePages_Free:") h.free = v;
    if (f[0] == "Hugepagesize:") {
      h.page_bytes = f.size() > 2 && f[2] == "kB" ? v << 10 : v;
    }
  }
  return h;
}

bool HasCapIpcLock(const std::string& proc_status) {
  constexpr int kCapIpcLock = 14;
  for (absl::string_view line : absl::StrSplit(proc_status, '\n')) {
    if (!absl::ConsumePrefix(&line, "CapEff:")) continue;
    uint64_t caps = 0;
    if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(line), &caps)) {
      return false;
    }
    return (caps >> kCapIpcLock) & 1;
  }
  return false;
}

uint64_t ComputeNodeMemlockBytes(int threads) {
  return static_cast<uint64_t>(std::max(threads, 1) + 1) *
         FLAGS_rdma_staging_bytes;
}

std::string BytesText(uint64_t bytes) {
  if (bytes == ~uint64_t{0}) return "unlimited";
  constexpr uint64_t kKiB = 1 << 10, kMiB = 1 << 20, kGiB = 1 << 30;
  if (bytes >= kGiB) return absl::StrFormat("%.1f GiB", bytes / double(kGiB));
  if (bytes >= kMiB) return absl::StrFormat("%.0f MiB", bytes / double(kMiB));
  if (bytes >= kKiB) return absl::StrFormat("%.0f KiB", bytes / double(kKiB));
  return absl::StrFormat("%d B", bytes);
}

std::vector<std::string> DoctorFlagNames() {
  return {"memory_nodes",       "transport",   "threads",
          "memory_mb",          "rdma_device", "transport_timeout_ms",
          "rdma_staging_bytes", "secret_file"};
}

int DoctorCommand() {
  gflags::CommandLineFlagInfo transport_flag;
  gflags::GetCommandLineFlagInfo("transport", &transport_flag);
  const bool tcp = !transport_flag.is_default && FLAGS_transport == "tcp";
  if (!transport_flag.is_default && FLAGS_transport != "tcp" &&
      FLAGS_transport != "rdma") {
    return ReportError(absl::InvalidArgumentError(
        "dmg doctor: --transport must be rdma (the default) or tcp"));
  }
  if (FLAGS_threads < 0) {
    return ReportError(absl::InvalidArgumentError("--threads must be >= 0"));
  }
  std::vector<transport::HostPort> nodes;
  if (!FLAGS_memory_nodes.empty()) {
    absl::StatusOr<std::vector<transport::HostPort>> parsed =
        transport::ParseHostPorts(FLAGS_memory_nodes);
    if (!parsed.ok()) return ReportError(parsed.status());
    nodes = *std::move(parsed);
  }

  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::printf("dmg doctor on %s: can dmg run here with --transport=%s?\n", host,
              tcp ? "tcp" : "rdma");
  Report report;
  const Level rdma_level = tcp ? Level::kWarn : Level::kFail;
  const bool rdma_ok = CheckRdma(report, rdma_level);
  const bool memlock_ok = CheckMemlock(report, rdma_level);
  CheckHugePages(report);
  CheckCuda(report);
  const bool nodes_ok = CheckMemoryNodes(report, nodes, tcp ? "tcp" : "rdma");

  const bool ready = nodes_ok && (tcp || (rdma_ok && memlock_ok));
  std::printf("\n");
  if (ready) {
    std::printf("doctor: ready for --transport=%s (%d warning(s))\n",
                tcp ? "tcp" : "rdma", report.warnings());
    return kExitOk;
  }
  std::printf(
      "doctor: NOT ready for --transport=%s: %d problem(s), see the FAIL "
      "lines above\n",
      tcp ? "tcp" : "rdma", report.failures());
  return kExitFailure;
}

}  // namespace dmg::cli
