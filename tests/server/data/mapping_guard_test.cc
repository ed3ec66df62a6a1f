// The mapping guard (server/data/mapping_guard.h) leaves a SIGBUS outside the
// mappings it watches as fatal as ever. (Its recovery inside a watched
// mapping: shared_memory_test.cc, the region shrunk while in use.)
#include "server/data/mapping_guard.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/sanitizers.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

#ifdef TENSOROP_ASAN_ENABLED
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

// Killed by the SIGBUS, or, under AddressSanitizer, by its handler, which
// reports the fault and then aborts (abort_on_error) or exits.
bool KilledBySigbus(int status) {
  if (WIFSIGNALED(status)) {
    return WTERMSIG(status) == SIGBUS || (kAddressSanitizer && WTERMSIG(status) == SIGABRT);
  }
  return kAddressSanitizer && WIFEXITED(status) && WEXITSTATUS(status) != 0;
}

// A SIGBUS that is not in a watched mapping is what it always was.
TEST(MappingGuardDeathTest, AFaultOutsideEveryWatchedMappingStillKills) {
  char path[] = "/tmp/tensorop-guard-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  void* watched_bytes = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
  void* unwatched_bytes = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(watched_bytes, MAP_FAILED);
  ASSERT_NE(unwatched_bytes, MAP_FAILED);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WatchedMapping> watch,
                       WatchedMapping::Watch(watched_bytes, 4096));
  ASSERT_EQ(ftruncate(fd, 0), 0);
  EXPECT_EQ(*static_cast<volatile char*>(watched_bytes), 0);
  EXPECT_TRUE(watch->faulted());
  EXPECT_EXIT(
      {
        [[maybe_unused]] volatile char read = *static_cast<volatile char*>(unwatched_bytes);
        std::exit(0);
      },
      KilledBySigbus, "");
  watch.reset();
  munmap(watched_bytes, 4096);
  munmap(unwatched_bytes, 4096);
  close(fd);
  unlink(path);
}

}  // namespace
}  // namespace tensorop::server
