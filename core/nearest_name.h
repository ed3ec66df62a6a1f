// "Did you mean": the known name nearest to a mistyped one, for tensord's and
// tensorctl's usage errors ("unknown flag --adress; did you mean --address?").
// A helper of its own (library tensorop_nearest_name), so the client, which
// links no core, and the server share it.
#ifndef TENSOROP_CORE_NEAREST_NAME_H_
#define TENSOROP_CORE_NEAREST_NAME_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace tensorop {

// The edits that turn `a` into `b`: a character inserted, deleted or replaced,
// or two adjacent ones swapped (optimal string alignment), with '-' and '_'
// alike and case ignored.
int EditDistance(absl::string_view a, absl::string_view b);

// The candidate nearest to `name` when it is close enough to be a slip: at
// most a third of `name`'s length in edits (at least 1, at most 3). The first
// of equally near ones; nullopt when none is close enough.
std::optional<std::string> NearestName(absl::string_view name,
                                       const std::vector<std::string>& candidates);

}  // namespace tensorop

#endif  // TENSOROP_CORE_NEAREST_NAME_H_
