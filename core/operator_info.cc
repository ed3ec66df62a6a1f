#include "core/operator_info.h"

#include <string>
#include <vector>

#include "absl/strings/strip.h"

namespace tensorop {

absl::string_view NumberedInputName(size_t k) {
  static const std::vector<std::string>* const names = [] {
    auto* made = new std::vector<std::string>(kMaxNumberedInputs);
    for (size_t i = 0; i < made->size(); ++i) (*made)[i] = absl::StrCat("inputs_", i);
    return made;
  }();
  return (*names)[k];
}

std::optional<size_t> NumberedInputIndex(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "inputs_") || name.empty() || name.size() > 9 ||
      (name.size() > 1 && name[0] == '0')) {
    return std::nullopt;
  }
  size_t k = 0;
  for (char digit : name) {
    if (digit < '0' || digit > '9') return std::nullopt;
    k = k * 10 + static_cast<size_t>(digit - '0');
  }
  return k;
}

}  // namespace tensorop
