#include "tests/support/proc_status.h"

#include <fstream>
#include <sstream>
#include <string>

namespace tensorop::testing {

int64_t ProcStatusBytes(pid_t pid, std::string_view field) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(file, line)) {
    // "VmHWM:\t  123456 kB"
    if (line.size() <= field.size() || line.compare(0, field.size(), field) != 0 ||
        line[field.size()] != ':') {
      continue;
    }
    std::istringstream value(line.substr(field.size() + 1));
    int64_t kib = -1;
    std::string unit;
    if (!(value >> kib >> unit) || unit != "kB") return -1;
    return kib * 1024;
  }
  return -1;
}

bool ProcessHasExited(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string id, name, state;  // "1234 (tensord) S ..."
  stat >> id >> name >> state;
  return state.empty() || state == "Z";
}

}  // namespace tensorop::testing
