// The public conformance cases (tests/conformance/cases), read once, for the
// client tests against a real tensord (integration_test.cc, tensorctl_test.cc).
#ifndef TENSOROP_TESTS_CLIENT_PUBLIC_CASES_H_
#define TENSOROP_TESTS_CLIENT_PUBLIC_CASES_H_

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/case_format.h"
#include "tests/support/tensord_process.h"

namespace tensorop::client {

using ::tensorop::testing::ConformanceCasesDir;

// The public cases, read once. A case that does not parse fails its test (and
// LoadCasesTest.ReadsEveryPublicCase says why).
inline const std::vector<LoadedCase>& PublicCases() {
  static const auto* const cases = [] {
    absl::StatusOr<std::vector<LoadedCase>> loaded = LoadCases(ConformanceCasesDir());
    if (!loaded.ok()) {
      std::fprintf(stderr, "cannot load the public cases: %s\n",
                   loaded.status().ToString().c_str());
      return new std::vector<LoadedCase>();
    }
    return new std::vector<LoadedCase>(*std::move(loaded));
  }();
  return *cases;
}

inline std::vector<std::string> PublicCaseNames() {
  std::vector<std::string> names;
  for (const LoadedCase& loaded : PublicCases()) names.push_back(loaded.name);
  return names;
}

inline const LoadedCase& PublicCase(const std::string& name) {
  for (const LoadedCase& loaded : PublicCases()) {
    if (loaded.name == name) return loaded;
  }
  std::abort();
}

}  // namespace tensorop::client

#endif  // TENSOROP_TESTS_CLIENT_PUBLIC_CASES_H_
