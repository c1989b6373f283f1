#include "transport/rdma/rdma_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

#ifdef DMG_HAVE_VERBS
#include <infiniband/verbs.h>
#endif

namespace dmg::transport::rdma {
namespace {

namespace fs = std::filesystem;

// The first line of a small sysfs file, trimmed; nullopt when unreadable
// (missing, or a GID attribute of an unused entry, which reads as EINVAL).
std::optional<std::string> ReadLine(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  return std::string(absl::StripAsciiWhitespace(line));
}

// Directory entries whose names are numbers, sorted numerically.
std::vector<int> NumberedEntries(const fs::path& dir) {
  std::vector<int> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    int n = 0;
    if (absl::SimpleAtoi(it->path().filename().string(), &n)) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

GidType ParseGidType(const std::string& text, bool ethernet) {
  // The kernel writes "IB/RoCE v1" for both (which one is the link layer's
  // business) and "RoCE v2".
  if (text == "RoCE v2") return GidType::kRoceV2;
  if (text == "IB/RoCE v1" || text == "RoCE v1" || text == "IB") {
    return ethernet ? GidType::kRoceV1 : GidType::kIb;
  }
  return GidType::kUnknown;
}

PortInfo ReadPort(const fs::path& dir, int port,
                  std::vector<std::string>* errors) {
  PortInfo p;
  p.port = port;
  std::optional<std::string> state = ReadLine(dir / "state");
  p.state = state ? SysfsEnumValue(*state) : "?";
  p.active = p.state == "ACTIVE";
  if (!state) errors->push_back((dir / "state").string() + ": unreadable");
  p.phys_state = SysfsEnumValue(ReadLine(dir / "phys_state").value_or("?"));
  p.link_layer = ReadLine(dir / "link_layer").value_or("?");
  p.ethernet = p.link_layer == "Ethernet";
  for (int i : NumberedEntries(dir / "gids")) {
    std::optional<std::string> text =
        ReadLine(dir / "gids" / std::to_string(i));
    if (!text) continue;
    uint8_t raw[16];
    if (!ParseSysfsGid(*text, raw)) {
      errors->push_back(absl::StrFormat(
          "%s: not a GID: '%s'", (dir / "gids" / std::to_string(i)), *text));
      continue;
    }
    if (std::all_of(raw, raw + 16, [](uint8_t b) { return b == 0; })) continue;
    GidEntry g;
    g.index = i;
    g.raw = *text;
    char buf[INET6_ADDRSTRLEN] = {};
    g.address =
        inet_ntop(AF_INET6, raw, buf, sizeof(buf)) != nullptr ? buf : *text;
    const fs::path attrs = dir / "gid_attrs";
    g.type = ParseGidType(
        ReadLine(attrs / "types" / std::to_string(i)).value_or(""), p.ethernet);
    g.netdev = ReadLine(attrs / "ndevs" / std::to_string(i)).value_or("");
    g.ipv4_mapped =
        std::all_of(raw, raw + 10, [](uint8_t b) { return b == 0; }) &&
        raw[10] == 0xff && raw[11] == 0xff;
    if (g.ipv4_mapped) {
      g.ipv4 =
          absl::StrFormat("%d.%d.%d.%d", raw[12], raw[13], raw[14], raw[15]);
    }
    if (p.ethernet && p.roce_v2_ipv4_gid_index < 0 && g.ipv4_mapped &&
        g.type == GidType::kRoceV2) {
      p.roce_v2_ipv4_gid_index = i;
    }
    p.gids.push_back(std::move(g));
  }
  return p;
}

#ifdef DMG_HAVE_VERBS
struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
struct ContextDeleter {
  void operator()(ibv_context* ctx) const { ibv_close_device(ctx); }
};

int MtuBytes(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256:
      return 256;
    case IBV_MTU_512:
      return 512;
    case IBV_MTU_1024:
      return 1024;
    case IBV_MTU_2048:
      return 2048;
    case IBV_MTU_4096:
      return 4096;
  }
  return 0;
}

// Opens every device libibverbs lists and fills the verbs fields of the
// sysfs devices of the same name.
void ProbeVerbs(ProbeResult* r) {
  int n = 0;
  std::unique_ptr<ibv_device*, DeviceListDeleter> list(ibv_get_device_list(&n));
  r->verbs_devices = list != nullptr ? n : 0;
  for (DeviceInfo& d : r->devices) {
    d.verbs_checked = true;
    ibv_device* dev = nullptr;
    for (int i = 0; i < r->verbs_devices; ++i) {
      if (d.name == ibv_get_device_name(list.get()[i])) dev = list.get()[i];
    }
    if (dev == nullptr) {
      d.verbs_error =
          "libibverbs does not list it (no user-space provider for its "
          "driver? Debian: ibverbs-providers)";
      continue;
    }
    std::unique_ptr<ibv_context, ContextDeleter> ctx(ibv_open_device(dev));
    if (ctx == nullptr) {
      d.verbs_error =
          absl::StrFormat("ibv_open_device: %s", std::strerror(errno));
      continue;
    }
    d.verbs_open = true;
    for (PortInfo& p : d.ports) {
      ibv_port_attr pa{};
      if (ibv_query_port(ctx.get(), static_cast<uint8_t>(p.port), &pa) != 0) {
        continue;
      }
      p.active_mtu = MtuBytes(pa.active_mtu);
      p.max_mtu = MtuBytes(pa.max_mtu);
    }
  }
}
#endif

}  // namespace

const char* GidTypeName(GidType type) {
  switch (type) {
    case GidType::kIb:
      return "IB";
    case GidType::kRoceV1:
      return "RoCE v1";
    case GidType::kRoceV2:
      return "RoCE v2";
    case GidType::kUnknown:
      break;
  }
  return "?";
}

std::string SysfsEnumValue(const std::string& text) {
  size_t colon = text.find(": ");
  std::string v = colon == std::string::npos ? text : text.substr(colon + 2);
  return std::string(absl::StripAsciiWhitespace(v));
}

bool ParseSysfsGid(const std::string& text, uint8_t out[16]) {
  if (text.size() != 39) return false;
  for (int g = 0; g < 8; ++g) {
    if (g > 0 && text[g * 5 - 1] != ':') return false;
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = text[g * 5 + k];
      if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
      v = v * 16 +
          (std::isdigit(static_cast<unsigned char>(c))
               ? c - '0'
               : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10);
    }
    out[2 * g] = static_cast<uint8_t>(v >> 8);
    out[2 * g + 1] = static_cast<uint8_t>(v & 0xff);
  }
  return true;
}

ProbeResult ReadSysfs(const std::string& sysfs_root) {
  ProbeResult r;
  std::error_code ec;
  const fs::path root(sysfs_root);
  r.sysfs_present = fs::is_directory(root, ec);
  if (!r.sysfs_present) return r;
  std::vector<std::string> names;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const fs::path dir = root / name;
    DeviceInfo d;
    d.name = name;
    d.node_type = SysfsEnumValue(ReadLine(dir / "node_type").value_or("?"));
    d.fw_ver = ReadLine(dir / "fw_ver").value_or("");
    for (int port : NumberedEntries(dir / "ports")) {
      d.ports.push_back(ReadPort(dir / "ports" / std::to_string(port), port,
                                 &r.sysfs_errors));
    }
    if (d.ports.empty()) {
      r.sysfs_errors.push_back((dir / "ports").string() + ": no ports");
    }
    r.devices.push_back(std::move(d));
  }
  return r;
}

ProbeResult ProbeRdma(const std::string& sysfs_root,
                      const std::string& dev_root) {
  ProbeResult r = ReadSysfs(sysfs_root);
  std::error_code ec;
  for (fs::directory_iterator it(dev_root, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("uverbs", 0) == 0) r.uverbs_nodes.push_back(name);
    if (name == "rdma_cm") r.rdma_cm_node = true;
  }
  std::sort(r.uverbs_nodes.begin(), r.uverbs_nodes.end());
#ifdef DMG_HAVE_VERBS
  r.verbs_built = true;
  ProbeVerbs(&r);
#endif
  return r;
}

}  // namespace dmg::transport::rdma
