#include "tools/cli.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gflags/gflags.h"

namespace dmg::cli {

absl::Status ParseFlags(const std::vector<std::string>& args,
                        const std::vector<std::string>& allowed) {
  auto is_allowed = [&](const std::string& name) {
    return std::find(allowed.begin(), allowed.end(), name) != allowed.end();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!absl::StartsWith(arg, "-") || arg == "-" || arg == "--") {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", arg, "'"));
    }
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    std::string name = body, value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    gflags::CommandLineFlagInfo info;
    bool known = gflags::GetCommandLineFlagInfo(name.c_str(), &info);
    if (!known && !has_value && absl::StartsWith(name, "no") &&
        gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) &&
        info.type == "bool") {
      name = name.substr(2);
      value = "false";
      has_value = true;
      known = true;
    }
    if (!known || !is_allowed(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag --", name, " for this command (accepted: --",
          absl::StrJoin(allowed, ", --"), ")"));
    }
    if (!has_value) {
      if (info.type == "bool") {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " needs a value"));
      }
    }
    if (gflags::SetCommandLineOption(name.c_str(), value.c_str()).empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad value '", value, "' for flag --", name, " (", info.type, ")"));
    }
  }
  return absl::OkStatus();
}

int ReportError(const absl::Status& status) {
  std::fprintf(stderr, "dmg: error: %s\n",
               std::string(status.message()).c_str());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kPermissionDenied:
      return kExitBadInput;
    default:
      return kExitFailure;
  }
}

namespace {
std::vector<std::string>& StoredCommandLine() {
  static auto* line = new std::vector<std::string>();
  return *line;
}
}  // namespace

void SetCommandLine(int argc, char** argv) {
  StoredCommandLine().assign(argv, argv + argc);
}
const std::vector<std::string>& CommandLine() { return StoredCommandLine(); }

}  // namespace dmg::cli
