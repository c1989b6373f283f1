// Shared plumbing of the `dmg` command: strict flag parsing (unknown flags and
// bad values are bad input: one line, exit code 2) and Status -> exit code.
#ifndef DMG_TOOLS_CLI_H_
#define DMG_TOOLS_CLI_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace dmg::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // internal or environment failure
inline constexpr int kExitBadInput = 2;  // the user's input is wrong

// Sets gflags from args ("--name=value", "--name value", "--bool",
// "--nobool"). Returns InvalidArgumentError for an unknown flag, a bad value
// or a positional argument. `allowed` lists the flags this command accepts.
// `command` names the command in the error for an unknown flag, which
// suggests the nearest accepted one.
absl::Status ParseFlags(const std::vector<std::string>& args,
                        const std::vector<std::string>& allowed,
                        const std::string& command = "");

// The candidate nearest to `word` (a misspelling: a few edits, or a
// prefix of it), or "" when none is near.
std::string DidYouMean(const std::string& word,
                       const std::vector<std::string>& candidates);

// Prints "dmg: error: MESSAGE" and returns the exit code for the status:
// input errors (invalid argument, not found, data loss, failed precondition,
// out of range, permission denied) give 2, everything else 1.
int ReportError(const absl::Status& status);

// The command line this process was started with (for commands that start
// copies of themselves: dmg run --compute_nodes).
void SetCommandLine(int argc, char** argv);
const std::vector<std::string>& CommandLine();

}  // namespace dmg::cli

#endif  // DMG_TOOLS_CLI_H_
