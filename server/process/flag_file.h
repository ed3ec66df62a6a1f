// The text of a --flagfile, as words for tensord's flag parser. Pure (no I/O,
// no exit) so that it can be unit-tested and fuzzed; server/process/config.cc reads the
// file and returns an error as its status (tensord exits 2).
#ifndef TENSOROP_SERVER_PROCESS_FLAG_FILE_H_
#define TENSOROP_SERVER_PROCESS_FLAG_FILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensorop::server {

// One command-line word, and where it came from for error messages ("" for the
// command line, "FILE:LINE: " for a line of a --flagfile).
struct Argument {
  std::string text;
  std::string origin;
};

// The words of flag-file `text` read from `path`: one --name=value per line;
// blank lines and lines starting with # are skipped, surrounding whitespace is
// stripped. INVALID_ARGUMENT "PATH:LINE: expected one --name=value per line (no
// --flagfile), not "..."" for any other line.
absl::StatusOr<std::vector<Argument>> ParseFlagFile(absl::string_view text, absl::string_view path);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PROCESS_FLAG_FILE_H_
