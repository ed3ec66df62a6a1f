// Lines of text (a /metrics exposition, a log) picked for a test's assertions.
#ifndef TENSOROP_TESTS_SUPPORT_TEXT_LINES_H_
#define TENSOROP_TESTS_SUPPORT_TEXT_LINES_H_

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace tensorop::testing {

// The lines of `text` that start with `prefix`.
inline std::vector<std::string> LinesStartingWith(const std::string& text,
                                                  absl::string_view prefix) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, prefix)) lines.emplace_back(line);
  }
  return lines;
}

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_TEXT_LINES_H_
