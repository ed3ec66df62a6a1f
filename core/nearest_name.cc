#include "core/nearest_name.h"

#include <algorithm>
#include <cstddef>

#include "absl/strings/ascii.h"

namespace tensorop {
namespace {

char Folded(char c) { return c == '-' ? '_' : absl::ascii_tolower(static_cast<unsigned char>(c)); }

}  // namespace

int EditDistance(absl::string_view a, absl::string_view b) {
  // Three rows of the table: i - 2, i - 1 and i.
  std::vector<int> before(b.size() + 1);
  std::vector<int> previous(b.size() + 1);
  std::vector<int> current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const bool same = Folded(a[i - 1]) == Folded(b[j - 1]);
      current[j] =
          std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (same ? 0 : 1)});
      if (i > 1 && j > 1 && Folded(a[i - 1]) == Folded(b[j - 2]) &&
          Folded(a[i - 2]) == Folded(b[j - 1])) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::optional<std::string> NearestName(absl::string_view name,
                                       const std::vector<std::string>& candidates) {
  const int allowed = std::clamp(static_cast<int>(name.size()) / 3, 1, 3);
  std::optional<std::string> nearest;
  int best = allowed + 1;
  for (const std::string& candidate : candidates) {
    const int distance = EditDistance(name, candidate);
    if (distance < best) {
      best = distance;
      nearest = candidate;
    }
  }
  return nearest;
}

}  // namespace tensorop
