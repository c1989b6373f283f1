#include "tools/help.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gflags/gflags.h"

namespace dmg::cli {
namespace {

constexpr size_t kWidth = 80;
constexpr size_t kIndent = 8;  // continuation lines of a description

// Words of `text` filled into lines of at most kWidth columns, each after
// kIndent spaces.
std::string Wrap(const std::string& text) {
  std::string out, line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() && kIndent + line.size() + 1 + word.size() > kWidth) {
      absl::StrAppend(&out, std::string(kIndent, ' '), line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty())
    absl::StrAppend(&out, std::string(kIndent, ' '), line, "\n");
  return out;
}

std::string ShowDefault(const gflags::CommandLineFlagInfo& info) {
  if (info.type == "string") {
    return info.default_value.empty() ? "none" : "'" + info.default_value + "'";
  }
  return info.default_value;
}

}  // namespace

std::vector<std::string> FlagNames(const std::vector<FlagGroup>& groups) {
  std::vector<std::string> names;
  for (const FlagGroup& g : groups) {
    for (const std::string& f : g.flags) {
      if (std::find(names.begin(), names.end(), f) == names.end()) {
        names.push_back(f);
      }
    }
  }
  return names;
}

std::string FormatFlagGroups(const std::vector<FlagGroup>& groups) {
  std::string out;
  std::vector<std::string> shown;
  for (const FlagGroup& g : groups) {
    std::string block;
    for (const std::string& name : g.flags) {
      if (std::find(shown.begin(), shown.end(), name) != shown.end()) continue;
      shown.push_back(name);
      gflags::CommandLineFlagInfo info;
      if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info)) continue;
      const std::string head = info.type == "bool"
                                   ? absl::StrCat("  --", name)
                                   : absl::StrCat("  --", name, "=", info.type);
      std::string description = info.description, shown = ShowDefault(info);
      if (auto own = g.own.find(name); own != g.own.end()) {
        description = own->second.description;
        shown = own->second.default_value;
      }
      absl::StrAppend(&block, head, "\n",
                      Wrap(absl::StrCat(description, " (default: ", shown,
                                        ")")));
    }
    if (!block.empty()) absl::StrAppend(&out, g.title, ":\n", block, "\n");
  }
  return out;
}

}  // namespace dmg::cli
