// tensorop's version, the same string everywhere (tensord --version, tensorctl
// --version, the startup log, tensorop_build_info, the v2 ServerMetadata and
// the Python package): the CMake project version plus `git describe` when the
// build had a git checkout (cmake/version.cmake).
#ifndef TENSOROP_CORE_VERSION_H_
#define TENSOROP_CORE_VERSION_H_

#include "absl/strings/string_view.h"

namespace tensorop {

absl::string_view Version();

}  // namespace tensorop

#endif  // TENSOROP_CORE_VERSION_H_
