#include "tools/secret_command.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "gflags/gflags.h"
#include "tools/cli.h"
#include "tools/transport_flags.h"
#include "transport/auth.h"

DEFINE_bool(job_only, false,
            "secret: write the job key derived from the cluster secret of "
            "--secret_file (or $DMG_SECRET_FILE) instead of a new secret");
DECLARE_string(output);

namespace dmg::cli {

std::vector<std::string> SecretFlagNames() {
  return {"output", "job_only", "secret_file"};
}

int SecretCommand() {
  if (FLAGS_output.empty() || FLAGS_output == "-") {
    return ReportError(absl::InvalidArgumentError(
        "dmg secret needs --output=FILE (a secret is never printed)"));
  }
  absl::StatusOr<transport::Secret> secret = absl::InternalError("unreachable");
  if (FLAGS_job_only) {
    absl::StatusOr<std::optional<transport::Secret>> cluster =
        SecretFromFlags();
    if (!cluster.ok()) return ReportError(cluster.status());
    if (!*cluster) {
      return ReportError(absl::InvalidArgumentError(
          "--job_only derives the job key from the cluster secret: pass "
          "--secret_file=FILE (or set DMG_SECRET_FILE)"));
    }
    if (!(*cluster)->admin()) {
      return ReportError(absl::InvalidArgumentError(
          "--secret_file holds a job key already, not the cluster secret"));
    }
    secret = (*cluster)->JobOnly();
  } else {
    secret = transport::Secret::Generate();
  }
  if (!secret.ok()) return ReportError(secret.status());
  if (absl::Status s = secret->WriteFile(FLAGS_output); !s.ok()) {
    return ReportError(s);
  }
  std::printf("wrote a %s to %s (mode 0600)\n",
              FLAGS_job_only ? "job key" : "new cluster secret",
              FLAGS_output.c_str());
  return kExitOk;
}

}  // namespace dmg::cli
