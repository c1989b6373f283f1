#include "tools/cli.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gflags/gflags.h"

namespace dmg::cli {
namespace {

// Edits (insert, delete, replace, swap two neighbours) from a to b.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1,
                                     std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// One line for a flag the command does not take: the nearest it does
// take, and where all of them are listed (not all of them: a run has 50).
absl::Status UnknownFlag(const std::string& name, const std::string& command,
                         const std::vector<std::string>& allowed) {
  const std::string near = DidYouMean(name, allowed);
  std::string text = absl::StrCat(
      "unknown flag --", name,
      command.empty() ? "" : absl::StrCat(" for dmg ", command),
      near.empty() ? "" : absl::StrCat(" (did you mean --", near, "?)"),
      "; `dmg help ", command.empty() ? "COMMAND" : command,
      "` lists its flags");
  // Test hook: the list the parser accepts, for the test that the help
  // shows every one.
  if (std::getenv("DMG_TEST_LIST_FLAGS") != nullptr) {
    absl::StrAppend(&text, " (accepted: --", absl::StrJoin(allowed, ", --"),
                    ")");
  }
  return absl::InvalidArgumentError(text);
}

}  // namespace

std::string DidYouMean(const std::string& word,
                       const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& c : candidates) {
    // A prefix of one name only (--cache_f) is that name.
    size_t d = EditDistance(word, c);
    if (word.size() >= 3 && absl::StartsWith(c, word)) d = std::min<size_t>(d, 1);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

absl::Status ParseFlags(const std::vector<std::string>& args,
                        const std::vector<std::string>& allowed,
                        const std::string& command) {
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
      return UnknownFlag(name, command, allowed);
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
