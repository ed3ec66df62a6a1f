// Files a test writes for a program under test to read (case files, flag
// files), removed when the TempFiles goes away.
#ifndef TENSOROP_TESTS_SUPPORT_TEMP_FILES_H_
#define TENSOROP_TESTS_SUPPORT_TEMP_FILES_H_

#include <string>
#include <vector>

namespace tensorop::testing {

class TempFiles {
 public:
  TempFiles() = default;
  ~TempFiles();
  TempFiles(const TempFiles&) = delete;
  TempFiles& operator=(const TempFiles&) = delete;

  // A new file under /tmp named "<stem>-XXXXXX<suffix>" holding `text`; its
  // path. Fails the current test if it cannot be written.
  std::string Write(const std::string& text, const std::string& stem = "tensorop-test",
                    const std::string& suffix = "");

 private:
  std::vector<std::string> paths_;
};

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_TEMP_FILES_H_
