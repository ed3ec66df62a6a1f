#include "server/memory/malloc_tuning.h"

#include <cstdlib>
#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace tensorop::server {
namespace {

// Sets GLIBC_TUNABLES (or unsets it) for one test, restoring it after.
class ScopedTunables {
 public:
  explicit ScopedTunables(const char* value) {
    if (const char* current = std::getenv("GLIBC_TUNABLES")) saved_ = current;
    if (value == nullptr) {
      unsetenv("GLIBC_TUNABLES");
    } else {
      setenv("GLIBC_TUNABLES", value, 1);
    }
  }
  ~ScopedTunables() {
    if (saved_.has_value()) {
      setenv("GLIBC_TUNABLES", saved_->c_str(), 1);
    } else {
      unsetenv("GLIBC_TUNABLES");
    }
  }

 private:
  std::optional<std::string> saved_;
};

TEST(GlibcTunableSetTest, FindsANameAnywhereInTheList) {
  ScopedTunables tunables("glibc.malloc.hugetlb=1:glibc.malloc.arena_max=4");
  EXPECT_TRUE(GlibcTunableSet("glibc.malloc.hugetlb"));
  EXPECT_TRUE(GlibcTunableSet("glibc.malloc.arena_max"));
  EXPECT_FALSE(GlibcTunableSet("glibc.malloc.arena_test"));
}

TEST(GlibcTunableSetTest, MatchesWholeNamesOnly) {
  ScopedTunables tunables("glibc.malloc.arena_max_x=4:x.glibc.malloc.arena_max=2");
  EXPECT_FALSE(GlibcTunableSet("glibc.malloc.arena_max"));
  EXPECT_FALSE(GlibcTunableSet("glibc.malloc"));
}

TEST(GlibcTunableSetTest, NothingIsSetWithoutTheVariable) {
  ScopedTunables tunables(nullptr);
  EXPECT_FALSE(GlibcTunableSet("glibc.malloc.arena_max"));
  ScopedTunables empty("");
  EXPECT_FALSE(GlibcTunableSet("glibc.malloc.arena_max"));
}

}  // namespace
}  // namespace tensorop::server
