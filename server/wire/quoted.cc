#include "server/wire/quoted.h"

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

}  // namespace tensorop::server
