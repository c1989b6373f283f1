#include "tools/job_token.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "transport/auth.h"

DEFINE_string(job_token_file, "",
              "the job's token, the credential that keeps everyone else out "
              "of the job's state on the memory nodes: read from this file, "
              "written there when absent (none: $DMG_JOB_TOKEN, else "
              "$HOME/.dmg/jobs/JOB.token for a job named with --job, else a "
              "fresh one); --resume needs the token the job ran with");

namespace dmg::cli {
namespace {

using transport::JobToken;

// Reads `path`, or (create) writes a fresh token there: a private
// temporary file linked into place, so processes of one job that start
// together all end up with the one that got there first.
absl::StatusOr<JobToken> ReadOrCreate(const std::string& path, bool create) {
  absl::StatusOr<JobToken> token = JobToken::ReadFile(path);
  if (token.ok() || !create || !absl::IsNotFound(token.status())) return token;
  DMG_ASSIGN_OR_RETURN(JobToken fresh, JobToken::Generate());
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  ::unlink(tmp.c_str());
  DMG_RETURN_IF_ERROR(fresh.WriteFile(tmp));
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int saved = errno;
  ::unlink(tmp.c_str());
  if (linked == 0) return fresh;
  if (saved == EEXIST) return JobToken::ReadFile(path);
  return absl::FailedPreconditionError(
      absl::StrFormat("cannot create %s: %s", path, std::strerror(saved)));
}

// `dir` and its parent, private to this user (false: cannot).
bool MakePrivateDir(const std::string& dir) {
  const std::string parent = dir.substr(0, dir.rfind('/'));
  for (const std::string& d : {parent, dir}) {
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  struct stat st;
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::Status NoTokenToResume(const std::string& job, const std::string& where) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "--resume of job '%s' needs the job token it ran with, and %s: resume "
      "as the user who started the job, on a host that shares its home "
      "folder, or pass --job_token_file=PATH (or $%s) with the job's token",
      job, where, JobToken::kEnvVar));
}

}  // namespace

std::string DefaultJobTokenPath(const std::string& job) {
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') return "";
  // One file per name; characters a path cannot hold become '_' (two names
  // that meet so share a token: both are this user's own jobs).
  std::string file = job;
  for (char& c : file) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '-' && c != '_') c = '_';
  }
  if (file.empty() || file[0] == '.') file = "_" + file;
  return absl::StrCat(home, "/.dmg/jobs/", file, ".token");
}

absl::Status ResolveJobToken(const std::string& job, bool named, bool resume) {
  std::optional<JobToken> token;
  if (!FLAGS_job_token_file.empty()) {
    absl::StatusOr<JobToken> t = ReadOrCreate(FLAGS_job_token_file, !resume);
    if (resume && absl::IsNotFound(t.status())) {
      return NoTokenToResume(job, FLAGS_job_token_file + " does not exist");
    }
    if (!t.ok()) {
      return absl::Status(
          t.status().code(),
          absl::StrCat("--job_token_file: ", t.status().message()));
    }
    token = *std::move(t);
  } else if (const char* env = std::getenv(JobToken::kEnvVar);
             env != nullptr && *env != '\0') {
    absl::StatusOr<JobToken> t = JobToken::FromHex(env);
    if (!t.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("$", JobToken::kEnvVar, ": ", t.status().message()));
    }
    return absl::OkStatus();  // already where the connections look
  } else if (named) {
    const std::string path = DefaultJobTokenPath(job);
    const std::string dir = path.substr(0, path.rfind('/'));
    if (path.empty() || !MakePrivateDir(dir)) {
      if (resume) {
        return NoTokenToResume(
            job, path.empty() ? "$HOME is not set"
                              : absl::StrCat("cannot create ", dir, ": ",
                                             std::strerror(errno)));
      }
      LOG(WARNING) << "job '" << job << "': no private folder for its token ("
                   << (path.empty()
                           ? std::string("$HOME is not set")
                           : absl::StrCat(dir, ": ", std::strerror(errno)))
                   << "): it lives in this process and the ones it starts "
                      "only, so no later --resume can prove it is this job "
                      "(--job_token_file=PATH keeps it)";
    } else {
      absl::StatusOr<JobToken> t = ReadOrCreate(path, !resume);
      if (resume && absl::IsNotFound(t.status())) {
        return NoTokenToResume(job, path + " does not exist");
      }
      if (!t.ok()) return t.status();
      token = *std::move(t);
    }
  }
  if (!token) {
    DMG_ASSIGN_OR_RETURN(JobToken fresh, JobToken::Generate());
    token = std::move(fresh);
  }
  if (::setenv(JobToken::kEnvVar, token->Hex().c_str(), 1) != 0) {
    return absl::InternalError(absl::StrCat("setenv: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace dmg::cli
