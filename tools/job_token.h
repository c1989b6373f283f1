// Where a `dmg run` finds its job's token (transport/auth.h): the
// credential that binds the job's name on the memory nodes, so that only
// the job's own processes (and its --resume) reach its regions.
//
// In order:
//   --job_token_file=PATH   the file (written there when absent, unless
//                           --resume: then it must exist);
//   $DMG_JOB_TOKEN          set by the dmg run or the launcher that
//                           started this process (64 hex digits);
//   a named job (--job, or srun's job): $HOME/.dmg/jobs/NAME.token,
//                           written at the job's first run, so --resume
//                           and the job's processes on hosts that share
//                           the home folder find it;
//   otherwise               a fresh one, for this process and the ones it
//                           starts.
// The token found is put in $DMG_JOB_TOKEN, where every connection of this
// process (JobToken::ForThisProcess) and every process it starts find it.
#ifndef DMG_TOOLS_JOB_TOKEN_H_
#define DMG_TOOLS_JOB_TOKEN_H_

#include <string>

#include "absl/status/status.h"
#include "gflags/gflags.h"

DECLARE_string(job_token_file);

namespace dmg::cli {

// `named`: the job's name was given (not made up for this process).
// Call before the first connection.
absl::Status ResolveJobToken(const std::string& job, bool named, bool resume);

// The file a named job's token is kept in without --job_token_file
// (empty: no home folder).
std::string DefaultJobTokenPath(const std::string& job);

}  // namespace dmg::cli

#endif  // DMG_TOOLS_JOB_TOKEN_H_
