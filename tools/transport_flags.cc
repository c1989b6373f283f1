#include "tools/transport_flags.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_format.h"
#include "gflags/gflags.h"
#include "transport/rdma/rdma_probe.h"
#ifdef DMG_HAVE_RDMA
#include "transport/rdma/rdma_transport.h"
#endif

DEFINE_int32(transport_timeout_ms, 10000,
             "bound on every network wait; a dead peer is reported within it");
DEFINE_string(secret_file, "",
              "file holding the cluster secret (`dmg secret` writes one); "
              "default: $DMG_SECRET_FILE; neither: the memory nodes must be "
              "open");
DEFINE_string(rdma_device, "",
              "RDMA device (default: the one bound to the "
              "address)");
DEFINE_int32(rdma_port, 1, "RDMA device port");
DEFINE_int32(rdma_gid_index, -1,
             "GID index (-1: the RoCEv2 IPv4-mapped GID, found automatically)");
DEFINE_int32(rdma_sq_depth, 256, "RDMA send queue depth per queue pair");
DEFINE_int32(rdma_cq_depth, 512, "RDMA completion queue depth");
DEFINE_uint64(rdma_staging_bytes, dmg::transport::rdma::kDefaultStagingBytes,
              "registered bounce buffer per RDMA endpoint (one per worker "
              "thread); bigger batches are split. Each counts against the "
              "locked-memory limit (ulimit -l)");

namespace dmg::cli {

// Why two memory nodes hold stores of different loads: one restarted from
// a snapshot of another load (it is said so), or a load under way or
// stopped half way, or a list that mixes two clusters.
std::string DifferentLoads(const transport::HostPort& a,
                           const transport::TcpControl::StoreInfo& ia,
                           const transport::HostPort& b,
                           const transport::TcpControl::StoreInfo& ib) {
  const auto restored = [](const transport::HostPort& n,
                           const transport::TcpControl::StoreInfo& i) {
    return absl::StrFormat(
        "memory node %s restarted from its snapshot %d, "
        "which holds another load",
        n.ToString(), i.restored_snapshot);
  };
  if (ia.restored_snapshot != 0 || ib.restored_snapshot != 0) {
    return absl::StrFormat(
        "memory nodes %s and %s hold stores of different loads: %s; run "
        "`dmg load` again so that every node holds the same graph",
        a.ToString(), b.ToString(),
        ib.restored_snapshot != 0 ? restored(b, ib) : restored(a, ia));
  }
  return absl::StrFormat(
      "memory nodes %s and %s hold stores of different loads: a `dmg load` "
      "is under way or stopped half way (run it again), or --memory_nodes "
      "mixes two clusters",
      a.ToString(), b.ToString());
}

namespace {

#ifdef DMG_HAVE_RDMA
transport::rdma::RdmaOptions RdmaOptionsFromFlags() {
  transport::rdma::RdmaOptions o;
  o.device = FLAGS_rdma_device;
  o.port = FLAGS_rdma_port;
  o.gid_index = FLAGS_rdma_gid_index;
  o.send_queue_depth = FLAGS_rdma_sq_depth;
  o.completion_queue_depth = FLAGS_rdma_cq_depth;
  o.staging_bytes = FLAGS_rdma_staging_bytes;
  o.timeout_ms = FLAGS_transport_timeout_ms;
  return o;
}

class RdmaServiceImpl : public RdmaService {
 public:
  explicit RdmaServiceImpl(
      std::unique_ptr<transport::rdma::RdmaMemoryService> s)
      : service_(std::move(s)) {}
  std::string binding() const override { return service_->binding(); }

 private:
  std::unique_ptr<transport::rdma::RdmaMemoryService> service_;
};
#endif

// Each memory node must hold the slice of the store its position implies.
// A node without a store (never loaded, or its load failed) is named as
// such: its reported id means nothing then.

absl::Status CheckNodeOrder(transport::TcpControl& control) {
  for (uint32_t i = 0; i < control.num_nodes(); ++i) {
    absl::StatusOr<std::vector<transport::RegionInfo>> regions =
        control.List(i);
    if (!regions.ok()) {
      return absl::Status(regions.status().code(),
                          absl::StrFormat("memory node %s (position %d): %s",
                                          control.node(i).ToString(), i,
                                          regions.status().message()));
    }
    const bool has_store = std::any_of(regions->begin(), regions->end(),
                                       [](const transport::RegionInfo& r) {
                                         return r.id == transport::kStoreRegion;
                                       });
    if (!has_store) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "memory node %s (position %d) holds no store: it was never loaded, "
          "or its `dmg load` failed; load the graph with `dmg load "
          "--graph=SPEC --memory_nodes=...` (the same list, in the same "
          "order) first",
          control.node(i).ToString(), i));
    }
    if (i > 0) {
      // Every node must hold the same load: a load under way, one that
      // failed half way, or a list that mixes clusters is refused here,
      // not read as a mix of graphs.
      absl::StatusOr<transport::TcpControl::StoreInfo> first =
          control.GetStoreInfo(0);
      absl::StatusOr<transport::TcpControl::StoreInfo> mine =
          control.GetStoreInfo(i);
      if (!first.ok()) return first.status();
      if (!mine.ok()) return mine.status();
      if (first->load_id != mine->load_id) {
        return absl::FailedPreconditionError(
            DifferentLoads(control.node(0), *first, control.node(i), *mine));
      }
    }
    if (control.reported_id(i) != i) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "memory node %s holds node %d of the store but is listed at "
          "position %d: list --memory_nodes in the order `dmg load` used",
          control.node(i).ToString(), control.reported_id(i), i));
    }
  }
  return absl::OkStatus();
}

[[maybe_unused]] constexpr char kNoRdmaBuild[] =
    "--transport=rdma: this dmg was built without libibverbs-dev/"
    "librdmacm-dev; use --transport=tcp or rebuild with them installed";

}  // namespace

std::vector<std::string> RdmaFlagNames() {
  return {"secret_file",   "transport_timeout_ms", "rdma_device",
          "rdma_port",     "rdma_gid_index",       "rdma_sq_depth",
          "rdma_cq_depth", "rdma_staging_bytes"};
}

absl::StatusOr<std::optional<transport::Secret>> SecretFromFlags() {
  std::string path = FLAGS_secret_file;
  if (path.empty()) {
    const char* env = std::getenv("DMG_SECRET_FILE");
    if (env != nullptr) path = env;
  }
  if (path.empty()) return std::optional<transport::Secret>();
  absl::StatusOr<transport::Secret> secret = transport::Secret::ReadFile(path);
  if (!secret.ok()) return secret.status();
  return std::optional<transport::Secret>(*std::move(secret));
}

absl::StatusOr<transport::TcpOptions> ClientOptions(transport::Role role,
                                                    const std::string& job) {
  transport::TcpOptions tcp;
  tcp.timeout_ms = FLAGS_transport_timeout_ms;
  tcp.credentials.role = role;
  tcp.credentials.job = job;
  absl::StatusOr<std::optional<transport::Secret>> secret = SecretFromFlags();
  if (!secret.ok()) return secret.status();
  tcp.credentials.secret = *std::move(secret);
  if (tcp.credentials.secret && role == transport::Role::kAdmin &&
      !tcp.credentials.secret->admin()) {
    return absl::PermissionDeniedError(
        "the secret file holds a job-only key; this command needs the "
        "cluster secret");
  }
  return tcp;
}

absl::StatusOr<std::unique_ptr<transport::Transport>> ConnectTransport(
    const std::string& kind, const std::string& list, const std::string& job) {
  absl::StatusOr<std::vector<transport::HostPort>> nodes =
      transport::ParseHostPorts(list);
  if (!nodes.ok()) return nodes.status();
  absl::StatusOr<transport::TcpOptions> options =
      ClientOptions(transport::Role::kJob, job);
  if (!options.ok()) return options.status();
  const transport::TcpOptions& tcp = *options;
  if (kind == "tcp") {
    absl::StatusOr<std::unique_ptr<transport::TcpTransport>> t =
        transport::TcpTransport::Connect(*nodes, tcp);
    if (!t.ok()) return t.status();
    if (absl::Status s = CheckNodeOrder((*t)->control()); !s.ok()) return s;
    return std::unique_ptr<transport::Transport>(std::move(*t));
  }
  if (kind == "rdma") {
#ifdef DMG_HAVE_RDMA
    absl::StatusOr<std::unique_ptr<transport::rdma::RdmaTransport>> t =
        transport::rdma::RdmaTransport::Connect(*nodes, RdmaOptionsFromFlags(),
                                                tcp.credentials);
    if (!t.ok()) return t.status();
    if (absl::Status s = CheckNodeOrder((*t)->control()); !s.ok()) return s;
    return std::unique_ptr<transport::Transport>(std::move(*t));
#else
    return absl::FailedPreconditionError(kNoRdmaBuild);
#endif
  }
  return absl::InvalidArgumentError("--transport must be local, tcp or rdma");
}

absl::StatusOr<std::unique_ptr<RdmaService>> StartRdmaService(
    const transport::HostPort& listen, memory_node::MemoryNode* node,
    transport::TcpServerOptions* server_options) {
#ifdef DMG_HAVE_RDMA
  absl::StatusOr<std::unique_ptr<transport::rdma::RdmaMemoryService>> s =
      transport::rdma::RdmaMemoryService::Start(RdmaOptionsFromFlags(), listen,
                                                node, server_options);
  if (!s.ok()) return s.status();
  return std::unique_ptr<RdmaService>(new RdmaServiceImpl(*std::move(s)));
#else
  return absl::FailedPreconditionError(kNoRdmaBuild);
#endif
}

}  // namespace dmg::cli
