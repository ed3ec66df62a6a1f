#include "server/request_log.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "core/dtype.h"
#include "nlohmann/json.hpp"
#include "server/convert.h"

namespace tensorop::server {

CallRecord DescribeRequest(absl::string_view method, const v1::RunRequest& request) {
  CallRecord record;
  record.method = method;
  record.id = request.id();
  record.op = std::string(OpCaseName(request));
  for (const auto& [name, tensor] : request.inputs()) {
    if (name == "input") {
      if (std::optional<DType> dtype = DTypeFromInt(tensor.dtype())) {
        record.dtype = std::string(DTypeName(*dtype));
      }
    }
    record.sizes.emplace_back(name,
                              std::vector<int64_t>(tensor.sizes().begin(), tensor.sizes().end()));
    record.bytes_in += static_cast<int64_t>(tensor.data().size());
  }
  // Map order is unspecified; sorted names make lines comparable.
  std::sort(record.sizes.begin(), record.sizes.end());
  return record;
}

std::string FormatLogLine(const CallRecord& record, const absl::Status& status,
                          absl::Time end) {
  nlohmann::ordered_json sizes = nlohmann::ordered_json::object();
  for (const auto& [name, dims] : record.sizes) sizes[name] = dims;

  nlohmann::ordered_json line;
  line["time"] = absl::FormatTime("%Y-%m-%d%ET%H:%M:%E6SZ", end, absl::UTCTimeZone());
  line["method"] = record.method;
  line["id"] = record.id;
  line["op"] = record.op;
  line["dtype"] = record.dtype;
  line["sizes"] = std::move(sizes);
  line["backend"] = record.backend;
  line["bytes_in"] = record.bytes_in;
  line["bytes_out"] = record.bytes_out;
  line["latency_us"] = absl::ToInt64Microseconds(end - record.start);
  line["status"] = absl::StatusCodeToString(status.code());
  if (!status.ok()) line["message"] = status.message();
  if (!record.identity.empty()) line["identity"] = record.identity;
  // Request ids and messages come from clients: replace invalid UTF-8 rather
  // than throw.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

void WriteLine(std::string line) {
  line.push_back('\n');
  // One write per line under a lock: stderr is unbuffered, and a line split over
  // several writes could interleave with another call's.
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const char* data = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t written = ::write(STDERR_FILENO, data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      return;  // nowhere to report a broken log
    }
    data += written;
    left -= static_cast<size_t>(written);
  }
}

}  // namespace

void LogCall(const CallRecord& record, const absl::Status& status, absl::Time end) {
  WriteLine(FormatLogLine(record, status, end));
}

void LogDeviceFailure(absl::string_view device, const absl::Status& status) {
  nlohmann::ordered_json line;
  line["time"] = absl::FormatTime("%Y-%m-%d%ET%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone());
  line["event"] = "device_failure";
  line["device"] = device;
  line["status"] = absl::StatusCodeToString(status.code());
  line["message"] = status.message();
  line["action"] = "marked unhealthy; retrying on cpu";
  WriteLine(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace tensorop::server
