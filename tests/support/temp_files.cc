#include "tests/support/temp_files.h"

#include <stdlib.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace tensorop::testing {

TempFiles::~TempFiles() {
  for (const std::string& path : paths_) unlink(path.c_str());
}

std::string TempFiles::Write(const std::string& text, const std::string& stem,
                             const std::string& suffix) {
  std::string path = "/tmp/" + stem + "-XXXXXX" + suffix;
  const int fd = mkstemps(path.data(), static_cast<int>(suffix.size()));
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return path;
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size())) << path;
  close(fd);
  paths_.push_back(path);
  return path;
}

}  // namespace tensorop::testing
