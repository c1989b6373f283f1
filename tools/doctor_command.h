// `dmg doctor [--memory_nodes=H:P,...] [--transport=rdma|tcp] [--threads=N]
// [--memory_mb=N] [--rdma_device=D]`: can this host run dmg over RDMA?
// Prints what it finds, section by section (RDMA devices, ports and GIDs
// and the GID index to use; verbs user space; locked-memory limit; huge
// pages; CUDA; the memory nodes), each line OK, WARN or FAIL with what to
// fix. Exit 0 when everything an rdma run needs is there (a device with an
// active port and a usable GID, enough locked memory, every given memory
// node answering), 1 otherwise, 2 on bad flags. With --transport=tcp the
// RDMA findings are shown but do not fail.
#ifndef DMG_TOOLS_DOCTOR_COMMAND_H_
#define DMG_TOOLS_DOCTOR_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

namespace dmg::cli {

std::vector<std::string> DoctorFlagNames();
int DoctorCommand();

// --- Pieces with no hardware behind them (tested in doctor_test). ---------

struct HugePages {
  uint64_t total = 0;       // HugePages_Total
  uint64_t free = 0;        // HugePages_Free
  uint64_t page_bytes = 0;  // Hugepagesize
};
// Parses /proc/meminfo text; missing fields stay 0.
HugePages ParseMeminfo(const std::string& meminfo);

// Whether CapEff in /proc/self/status text has CAP_IPC_LOCK (with it the
// locked-memory limit does not bind verbs registrations).
bool HasCapIpcLock(const std::string& proc_status);

// Locked memory one compute node process registers: one staging buffer per
// worker thread plus one for the cluster record.
uint64_t ComputeNodeMemlockBytes(int threads);

// "8 MiB", "1.5 GiB", "unlimited" (for ~0).
std::string BytesText(uint64_t bytes);

}  // namespace dmg::cli

#endif  // DMG_TOOLS_DOCTOR_COMMAND_H_
