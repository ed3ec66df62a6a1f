// tensord's --flagfile parser (server/process/flag_file.h) on arbitrary text: it never
// crashes, and what it accepts is what tensord's flag parser expects.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/process/flag_file.h"

namespace {

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<tensorop::server::Argument>> arguments =
      tensorop::server::ParseFlagFile(text, "flags");
  if (!arguments.ok()) {
    Check(arguments.status().code() == absl::StatusCode::kInvalidArgument, "error code");
    Check(absl::StartsWith(arguments.status().message(), "flags:"), "error names FILE:LINE");
    Check(absl::StrContains(arguments.status().message(), "expected one --name=value per line"),
          "error message");
    return 0;
  }
  int previous_line = 0;
  for (const tensorop::server::Argument& argument : *arguments) {
    Check(absl::StartsWith(argument.text, "--"), "a word starts with --");
    Check(!absl::StartsWith(argument.text, "--flagfile"), "no nested --flagfile");
    Check(absl::StripAsciiWhitespace(argument.text) == argument.text, "stripped");
    Check(!absl::StrContains(argument.text, '\n'), "one line");
    int line = 0;
    Check(std::sscanf(argument.origin.c_str(), "flags:%d: ", &line) == 1, "origin FILE:LINE");
    Check(argument.origin == absl::StrCat("flags:", line, ": "), "origin format");
    Check(line > previous_line, "lines in order");
    previous_line = line;
  }
  return 0;
}
