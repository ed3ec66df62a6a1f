#include "server/wire/quoted.h"

#include "absl/strings/str_cat.h"

namespace tensorop::server {

std::string CutForMessage(absl::string_view text, size_t max_bytes) {
  std::string out;
  for (char c : text.substr(0, max_bytes)) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (text.size() > max_bytes) out += "...";
  return out;
}

std::string Quoted(absl::string_view text) { return "\"" + CutForMessage(text) + "\""; }

absl::Status CheckIdBytes(absl::string_view id, absl::string_view field) {
  if (id.size() <= kMaxIdBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " is ", id.size(), " bytes; ids are at most ", kMaxIdBytes, " bytes"));
}

}  // namespace tensorop::server
