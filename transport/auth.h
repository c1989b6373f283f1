// Who may talk to a memory node, and how it is proven.
//
// A cluster shares one secret (32 random bytes, `dmg secret` writes it to a
// mode-0600 file). Every connection to a memory node, control or tcp data,
// starts with a hello naming the role it asks for and the job it belongs
// to; when the memory node holds a secret it then demands a challenge-
// response before it accepts anything else:
//
//   client -> hello {version, role, job, client nonce}
//   server -> {version, node id, auth required, server nonce}
//   client -> auth {HMAC-SHA-256(K_role, "dmg-client" | server nonce |
//                                 client nonce | role | job)}
//   server -> {HMAC-SHA-256(K_role, "dmg-server" | client nonce |
//                            server nonce | role | job)}
//
// Both nonces are fresh per connection, so a recorded exchange proves
// nothing later; the server's answer proves to the client that it talks to
// a memory node of its cluster (not one that would feed it made-up bytes).
//
// Two roles, two keys: K_admin is the cluster secret itself; K_job is
// HMAC(secret, "dmg job key") and can be handed to compute nodes alone
// (`dmg secret --job_only`), so a compute node that is broken into cannot
// load a store or stop a memory node. An admin secret can act as either.
//
// Every job shares K_job, so a job's name alone would not keep other
// holders of it out of the job's regions. A job connection also carries
// the job's token (JobToken, 32 random bytes only the job's processes
// hold), sealed under a pad only this exchange can compute:
//
//   client -> auth {proof, token XOR HMAC(K_job, "dmg-token" | server
//                                          nonce | client nonce | role | job)}
//
// The memory node binds the job's name to HMAC(token, "dmg job verifier" |
// job) at the name's first connection and holds it while the job has
// connections or kept regions there; a connection under that name with
// another token is refused, so its regions, and the ones kept for
// --resume, are reachable only with the token.
#ifndef DMG_TRANSPORT_AUTH_H_
#define DMG_TRANSPORT_AUTH_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace dmg::transport {

// What a connection may do once it is accepted.
enum class Role : uint8_t {
  // A compute job: reads the store, and reads, writes and frees only the
  // regions its own job allocated.
  kJob = 1,
  // The loader and operators: creates and writes the store, lists every
  // job's regions, stops the daemon.
  kAdmin = 2,
};
const char* RoleName(Role role);

using Digest = std::array<uint8_t, 32>;
using Nonce = std::array<uint8_t, 16>;

// A cluster secret (or a job-only key derived from one). Never printed: it
// has no formatter, and its bytes are wiped when it goes.
class Secret {
 public:
  static constexpr std::string_view kFileTag = "dmg-secret-1";

  // 32 bytes from the system's random source.
  static absl::StatusOr<Secret> Generate();
  // Reads a file `dmg secret` wrote. Refuses one that others may read (as
  // ssh does with keys), or that is not a regular file.
  static absl::StatusOr<Secret> ReadFile(const std::string& path);
  // Writes it to a new file (mode 0600); refuses to replace one.
  absl::Status WriteFile(const std::string& path) const;

  Secret(const Secret&) = default;
  Secret& operator=(const Secret&) = default;
  ~Secret();

  // True for the cluster secret, false for a job-only key.
  bool admin() const { return admin_; }
  Secret JobOnly() const;
  // The key a connection of `role` proves itself with; PermissionDenied for
  // kAdmin from a job-only key.
  absl::StatusOr<Digest> KeyFor(Role role) const;

 private:
  Secret(const Digest& bytes, bool admin) : bytes_(bytes), admin_(admin) {}
  Digest bytes_;
  bool admin_;
};

// A job's credential (above). Never printed: no formatter; Hex() exists
// only to hand it to the job's own processes (an environment variable).
class JobToken {
 public:
  static constexpr std::string_view kFileTag = "dmg-job-token-1";
  // The environment variable a job's processes share it through.
  static constexpr char kEnvVar[] = "DMG_JOB_TOKEN";

  static absl::StatusOr<JobToken> Generate();
  // 64 hex digits, as Hex() writes them.
  static absl::StatusOr<JobToken> FromHex(std::string_view hex);
  // This process's token: $DMG_JOB_TOKEN when set (the dmg run or the
  // launcher that started it), else one generated once per process.
  static absl::StatusOr<JobToken> ForThisProcess();
  // A file WriteFile wrote: private (mode 0600) and regular, as a secret.
  static absl::StatusOr<JobToken> ReadFile(const std::string& path);
  // A new file, mode 0600; AlreadyExists when the path is taken.
  absl::Status WriteFile(const std::string& path) const;

  JobToken(const JobToken&) = default;
  JobToken& operator=(const JobToken&) = default;
  ~JobToken();

  std::string Hex() const;
  const Digest& bytes() const { return bytes_; }

 private:
  explicit JobToken(const Digest& bytes) : bytes_(bytes) {}
  Digest bytes_;
};

// The token as a job connection sends it, and back (the same operation).
Digest SealToken(const Digest& key, const Nonce& server, const Nonce& client,
                 std::string_view job, const Digest& token);
// What the memory node keeps of a job's token: it proves nothing if read.
Digest TokenVerifier(const Digest& token, std::string_view job);

// Fresh random bytes for a challenge.
Nonce NewNonce();

// The two proofs of the exchange above.
Digest ClientProof(const Digest& key, const Nonce& server, const Nonce& client,
                   Role role, std::string_view job);
Digest ServerProof(const Digest& key, const Nonce& server, const Nonce& client,
                   Role role, std::string_view job);

// Constant-time comparison (no early exit that would time the match).
bool SameDigest(const Digest& a, const Digest& b);

}  // namespace dmg::transport

#endif  // DMG_TRANSPORT_AUTH_H_
