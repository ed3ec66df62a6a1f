#include "server/process/flag_file.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tensorop::server {

absl::StatusOr<std::vector<Argument>> ParseFlagFile(absl::string_view text,
                                                    absl::string_view path) {
  std::vector<Argument> arguments;
  int number = 0;
  // Lines as std::getline sees them: a final newline ends the last line
  // rather than starting an empty one (which is skipped anyway).
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    absl::string_view word = absl::StripAsciiWhitespace(line);
    if (word.empty() || absl::StartsWith(word, "#")) continue;
    std::string origin = absl::StrCat(path, ":", number, ": ");
    if (!absl::StartsWith(word, "--") || absl::StartsWith(word, "--flagfile")) {
      return absl::InvalidArgumentError(absl::StrCat(
          origin, "expected one --name=value per line (no --flagfile), not \"", word, "\""));
    }
    arguments.push_back({std::string(word), std::move(origin)});
  }
  return arguments;
}

}  // namespace tensorop::server
