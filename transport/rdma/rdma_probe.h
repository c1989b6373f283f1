// What this host offers for RDMA, as plain data (no verbs types): the devices
// under /sys/class/infiniband, each port's state, link layer and active MTU,
// every GID with its index, type and netdev, and the GID index the rdma
// transport uses (the RoCEv2 entry of an IPv4-mapped GID, ::ffff:a.b.c.d:
// the connection manager binds to the IP-mapped GID of the local address and
// CheckBinding prefers its RoCEv2 entry). `dmg doctor` prints it. The sysfs
// part takes its root as a parameter, so tests read a fake tree; the verbs
// part (active MTU, can libibverbs open the device) exists only in builds
// with libibverbs (DMG_HAVE_VERBS) and is skipped otherwise.
#ifndef DMG_TRANSPORT_RDMA_RDMA_PROBE_H_
#define DMG_TRANSPORT_RDMA_RDMA_PROBE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace dmg::transport::rdma {

// Bytes of the registered bounce buffer of one RDMA endpoint
// (RdmaOptions::staging_bytes defaults to this). A compute node opens one
// endpoint per worker thread, plus one for its cluster record.
inline constexpr uint64_t kDefaultStagingBytes = uint64_t{8} << 20;

inline constexpr char kSysfsRoot[] = "/sys/class/infiniband";
inline constexpr char kDevRoot[] = "/dev/infiniband";

enum class GidType { kUnknown, kIb, kRoceV1, kRoceV2 };
const char* GidTypeName(GidType type);  // "IB", "RoCE v1", "RoCE v2", "?"

struct GidEntry {
  int index = 0;
  std::string raw;      // as sysfs writes it: 8 groups of 4 hex digits
  std::string address;  // IPv6 text, e.g. "::ffff:10.77.0.1"
  GidType type = GidType::kUnknown;
  std::string netdev;  // gid_attrs/ndevs/INDEX ("" when none)
  bool ipv4_mapped = false;
  std::string ipv4;  // "10.77.0.1" when ipv4_mapped
};

struct PortInfo {
  int port = 0;
  std::string state;  // "ACTIVE", "DOWN", ... ("?" when unreadable)
  bool active = false;
  std::string phys_state;  // "LinkUp", "Disabled", ...
  std::string link_layer;  // "Ethernet" (RoCE) or "InfiniBand"
  bool ethernet = false;
  int active_mtu = 0;  // bytes; 0 when unknown (no verbs)
  int max_mtu = 0;
  std::vector<GidEntry> gids;  // the non-zero entries, by index
  // The entry dmg's rdma transport uses with --rdma_gid_index=-1: the first
  // RoCE v2 GID that is IPv4-mapped; -1 when there is none (or InfiniBand).
  int roce_v2_ipv4_gid_index = -1;
};

struct DeviceInfo {
  std::string name;       // "rxe0", "mlx5_0"
  std::string node_type;  // "CA", ... from node_type ("1: CA")
  std::string fw_ver;
  std::vector<PortInfo> ports;
  // Verbs view (builds with libibverbs only): could the device be opened?
  bool verbs_checked = false;
  bool verbs_open = false;
  std::string verbs_error;
};

struct ProbeResult {
  bool sysfs_present = false;  // the sysfs root exists (kernel RDMA core)
  std::vector<DeviceInfo> devices;
  std::vector<std::string> sysfs_errors;  // unreadable entries, as text
  // /dev/infiniband: uverbsN (ib_uverbs) and rdma_cm (rdma_ucm).
  std::vector<std::string> uverbs_nodes;
  bool rdma_cm_node = false;
  // Whether this build has libibverbs; when it does, how many devices
  // ibv_get_device_list returned (user space: a provider for each driver).
  bool verbs_built = false;
  int verbs_devices = 0;
};

// "4: ACTIVE" -> "ACTIVE"; text without ": " is returned trimmed.
std::string SysfsEnumValue(const std::string& text);

// Parses a sysfs GID ("fe80:0000:...:3456") into 16 bytes. False when it is
// not 8 groups of 4 hex digits.
bool ParseSysfsGid(const std::string& text, uint8_t out[16]);

// The devices, ports and GIDs under `sysfs_root` (/sys/class/infiniband).
// Missing pieces are left empty and noted in sysfs_errors, never fatal.
ProbeResult ReadSysfs(const std::string& sysfs_root);

// ReadSysfs, plus /dev/infiniband and (with libibverbs) the verbs view:
// whether each device opens and each port's active MTU.
ProbeResult ProbeRdma(const std::string& sysfs_root = kSysfsRoot,
                      const std::string& dev_root = kDevRoot);

}  // namespace dmg::transport::rdma

#endif  // DMG_TRANSPORT_RDMA_RDMA_PROBE_H_
