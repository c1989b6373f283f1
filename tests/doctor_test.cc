// dmg doctor without hardware: the sysfs reader of transport/rdma/rdma_probe
// against a fake /sys/class/infiniband tree (an rxe0 laid out as Linux 6.1
// writes it), the /proc parsers, and the command's exit codes.
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tools/doctor_command.h"
#include "transport/rdma/rdma_probe.h"

namespace dmg {
namespace {

using transport::rdma::GidType;
using transport::rdma::ProbeResult;
using transport::rdma::ReadSysfs;

constexpr char kZeroGid[] = "0000:0000:0000:0000:0000:0000:0000:0000";

// Writes `content` + "\n" at root/rel, making the folders.
void Put(const std::string& root, const std::string& rel,
         const std::string& content) {
  std::filesystem::path p = std::filesystem::path(root) / rel;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << content << "\n";
}

// rxe0, one Ethernet port: link-local GIDs at 0 (v1) and 1 (v2), the
// IPv4-mapped 10.77.0.1 at 2 (v1) and 3 (v2), the rest of the table zero
// (whose type files are unreadable: not written here).
void FakeRxe(const std::string& root, const std::string& state = "4: ACTIVE") {
  const std::string port = "rxe0/ports/1/";
  Put(root, "rxe0/node_type", "1: CA");
  Put(root, "rxe0/fw_ver", "0.0.0");
  Put(root, port + "state", state);
  Put(root, port + "phys_state", "5: LinkUp");
  Put(root, port + "link_layer", "Ethernet");
  const char* gids[] = {"fe80:0000:0000:0000:5054:00ff:fe12:3456",
                        "fe80:0000:0000:0000:5054:00ff:fe12:3456",
                        "0000:0000:0000:0000:0000:ffff:0a4d:0001",
                        "0000:0000:0000:0000:0000:ffff:0a4d:0001"};
  const char* types[] = {"IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"};
  for (int i = 0; i < 16; ++i) {
    const std::string n = std::to_string(i);
    Put(root, port + "gids/" + n, i < 4 ? gids[i] : kZeroGid);
    if (i < 4) {
      Put(root, port + "gid_attrs/types/" + n, types[i]);
      Put(root, port + "gid_attrs/ndevs/" + n, "dum0");
    }
  }
}

TEST(RdmaProbeTest, ReadsDevicesPortsAndGids) {
  testing::TempDir dir;
  FakeRxe(dir.path());
  ProbeResult r = ReadSysfs(dir.path());
  ASSERT_TRUE(r.sysfs_present);
  EXPECT_TRUE(r.sysfs_errors.empty());
  ASSERT_EQ(r.devices.size(), 1u);
  const auto& d = r.devices[0];
  EXPECT_EQ(d.name, "rxe0");
  EXPECT_EQ(d.node_type, "CA");
  ASSERT_EQ(d.ports.size(), 1u);
  const auto& p = d.ports[0];
  EXPECT_EQ(p.port, 1);
  EXPECT_EQ(p.state, "ACTIVE");
  EXPECT_TRUE(p.active);
  EXPECT_EQ(p.phys_state, "LinkUp");
  EXPECT_TRUE(p.ethernet);
  ASSERT_EQ(p.gids.size(), 4u);  // zero entries are left out
  EXPECT_EQ(p.gids[0].index, 0);
  EXPECT_EQ(p.gids[0].address, "fe80::5054:ff:fe12:3456");
  EXPECT_EQ(p.gids[0].type, GidType::kRoceV1);
  EXPECT_FALSE(p.gids[0].ipv4_mapped);
  EXPECT_EQ(p.gids[1].type, GidType::kRoceV2);
  EXPECT_EQ(p.gids[2].type, GidType::kRoceV1);
  EXPECT_TRUE(p.gids[2].ipv4_mapped);
  EXPECT_EQ(p.gids[3].address, "::ffff:10.77.0.1");
  EXPECT_EQ(p.gids[3].ipv4, "10.77.0.1");
  EXPECT_EQ(p.gids[3].netdev, "dum0");
  // What the rdma transport binds to: the RoCE v2 entry of the mapped GID.
  EXPECT_EQ(p.roce_v2_ipv4_gid_index, 3);
}

TEST(RdmaProbeTest, NoIpv4MeansNoIndex) {
  testing::TempDir dir;
  FakeRxe(dir.path());
  // Drop the address: the mapped entries are zero again.
  Put(dir.path(), "rxe0/ports/1/gids/2", kZeroGid);
  Put(dir.path(), "rxe0/ports/1/gids/3", kZeroGid);
  ProbeResult r = ReadSysfs(dir.path());
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].ports[0].gids.size(), 2u);
  EXPECT_EQ(r.devices[0].ports[0].roce_v2_ipv4_gid_index, -1);
}

TEST(RdmaProbeTest, DownPortAndInfiniBand) {
  testing::TempDir dir;
  FakeRxe(dir.path(), "1: DOWN");
  Put(dir.path(), "mlx5_0/node_type", "1: CA");
  Put(dir.path(), "mlx5_0/ports/1/state", "4: ACTIVE");
  Put(dir.path(), "mlx5_0/ports/1/link_layer", "InfiniBand");
  Put(dir.path(), "mlx5_0/ports/1/gids/0",
      "fe80:0000:0000:0000:0002:c903:0000:1234");
  Put(dir.path(), "mlx5_0/ports/1/gid_attrs/types/0", "IB/RoCE v1");
  ProbeResult r = ReadSysfs(dir.path());
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(r.devices[0].name, "mlx5_0");  // sorted by name
  const auto& ib = r.devices[0].ports[0];
  EXPECT_FALSE(ib.ethernet);
  EXPECT_EQ(ib.gids[0].type, GidType::kIb);
  EXPECT_EQ(ib.roce_v2_ipv4_gid_index, -1);
  EXPECT_EQ(r.devices[1].ports[0].state, "DOWN");
  EXPECT_FALSE(r.devices[1].ports[0].active);
}

TEST(RdmaProbeTest, MissingRootAndBadGid) {
  EXPECT_FALSE(ReadSysfs("/nonexistent/infiniband").sysfs_present);
  testing::TempDir dir;
  FakeRxe(dir.path());
  Put(dir.path(), "rxe0/ports/1/gids/5", "not-a-gid");
  ProbeResult r = ReadSysfs(dir.path());
  ASSERT_EQ(r.sysfs_errors.size(), 1u);
  EXPECT_NE(r.sysfs_errors[0].find("not a GID"), std::string::npos);
}

TEST(RdmaProbeTest, ParsesGidsAndEnums) {
  uint8_t raw[16];
  EXPECT_TRUE(transport::rdma::ParseSysfsGid(
      "0000:0000:0000:0000:0000:ffff:C0A8:0102", raw));
  EXPECT_EQ(raw[12], 0xc0);
  EXPECT_EQ(raw[15], 0x02);
  EXPECT_FALSE(transport::rdma::ParseSysfsGid("fe80::1", raw));
  EXPECT_FALSE(transport::rdma::ParseSysfsGid(
      "0000:0000:0000:0000:0000:ffff:c0a8:01g2", raw));
  EXPECT_EQ(transport::rdma::SysfsEnumValue("4: ACTIVE"), "ACTIVE");
  EXPECT_EQ(transport::rdma::SysfsEnumValue(" Ethernet "), "Ethernet");
}

TEST(DoctorTest, ParsesMeminfo) {
  cli::HugePages h = cli::ParseMeminfo(
      "MemTotal:       16318048 kB\n"
      "HugePages_Total:      64\n"
      "HugePages_Free:       60\n"
      "Hugepagesize:       2048 kB\n");
  EXPECT_EQ(h.total, 64u);
  EXPECT_EQ(h.free, 60u);
  EXPECT_EQ(h.page_bytes, 2u << 20);
  EXPECT_EQ(cli::ParseMeminfo("").page_bytes, 0u);
}

TEST(DoctorTest, CapIpcLock) {
  EXPECT_TRUE(cli::HasCapIpcLock("Name:\tdmg\nCapEff:\t000001ffffffffff\n"));
  EXPECT_TRUE(cli::HasCapIpcLock("CapEff:\t0000000000004000\n"));
  EXPECT_FALSE(cli::HasCapIpcLock("CapEff:\t0000000000000000\n"));
  EXPECT_FALSE(cli::HasCapIpcLock("CapPrm:\t0000000000004000\n"));
}

TEST(DoctorTest, MemlockNeedAndBytes) {
  EXPECT_EQ(cli::ComputeNodeMemlockBytes(2), 3 * (uint64_t{8} << 20));
  EXPECT_EQ(cli::BytesText(8 << 20), "8 MiB");
  EXPECT_EQ(cli::BytesText(~uint64_t{0}), "unlimited");
  EXPECT_EQ(cli::BytesText(uint64_t{3} << 29), "1.5 GiB");
}

TEST(DoctorCommandTest, BadFlagIsExit2) {
  testing::CommandResult r = testing::RunDmg("doctor --graph=kron:4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("dmg: error: unknown flag --graph"), std::string::npos)
      << r.err;
  EXPECT_EQ(testing::RunDmg("doctor --transport=local").exit_code, 2);
}

TEST(DoctorCommandTest, UnreachableMemoryNodeIsExit1) {
  // Port 1 on loopback: nothing listens, whatever this host's RDMA.
  testing::CommandResult r = testing::RunDmg(
      "doctor --transport=tcp --memory_nodes=127.0.0.1:1 "
      "--transport_timeout_ms=2000");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("== memory nodes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAIL  memory node 127.0.0.1:1"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("doctor: NOT ready"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace dmg
