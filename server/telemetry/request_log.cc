#include "server/telemetry/request_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/dtype.h"
#include "nlohmann/json.hpp"
#include "server/wire/convert.h"

namespace tensorop::server {

namespace {

// `text` cut to `limit` bytes, saying how long it was: "abc...(70 bytes)".
std::string Cut(absl::string_view text, size_t limit) {
  if (text.size() <= limit) return std::string(text);
  return absl::StrCat(text.substr(0, limit), "...(", text.size(), " bytes)");
}

}  // namespace

CallRecord DescribeChain(absl::string_view method, const v1::RunChainRequest& chain) {
  CallRecord record;
  record.method = method;
  record.id = Cut(chain.id(), kMaxLoggedIdBytes);
  record.input_count = 0;
  for (const v1::ChainStep& step : chain.steps()) {
    for (const auto& [name, input] : step.inputs()) {
      record.bytes_in += static_cast<int64_t>(input.tensor().data().size());
      ++record.input_count;
    }
  }
  return record;
}

void Redescribe(CallRecord& record, CallRecord described) {
  described.start = record.start;
  described.identity = std::move(record.identity);
  described.trace = std::move(record.trace);
  described.peer = std::move(record.peer);
  record = std::move(described);
}

CallRecord DescribeRequest(absl::string_view method, const v1::RunRequest& request) {
  CallRecord record;
  record.method = method;
  record.id = Cut(request.id(), kMaxLoggedIdBytes);
  record.op = std::string(OpCaseName(request));
  // Map order is unspecified; the first names in order make lines comparable.
  std::vector<const google::protobuf::MapPair<std::string, v1::Tensor>*> inputs;
  inputs.reserve(request.inputs().size());
  for (const auto& entry : request.inputs()) {
    inputs.push_back(&entry);
    if (entry.first == "input") {
      if (std::optional<DType> dtype = DTypeFromInt(entry.second.dtype())) {
        record.dtype = std::string(DTypeName(*dtype));
      }
    }
    record.bytes_in += static_cast<int64_t>(entry.second.data().size());
  }
  const size_t logged = std::min(inputs.size(), kMaxLoggedInputs);
  std::partial_sort(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(logged),
                    inputs.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  record.input_count = static_cast<int64_t>(inputs.size());
  for (size_t i = 0; i < logged; ++i) {
    const auto& sizes = inputs[i]->second.sizes();
    const size_t kept = std::min<size_t>(static_cast<size_t>(sizes.size()), kMaxLoggedEntries);
    record.sizes.emplace_back(
        Cut(inputs[i]->first, kMaxLoggedIdBytes),
        std::vector<int64_t>(sizes.begin(), sizes.begin() + static_cast<int>(kept)));
    record.sizes_lengths.push_back(sizes.size());
  }
  return record;
}

namespace {

// Appends `text` as a JSON string, as nlohmann's dump writes it: printable
// ASCII with nothing to escape (what almost every field is) as it is, the
// rest through nlohmann (escapes, invalid UTF-8 replaced).
void AppendJsonString(absl::string_view text, std::string& out) {
  const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  });
  if (plain) {
    absl::StrAppend(&out, "\"", text, "\"");
    return;
  }
  out += nlohmann::json(std::string(text))
             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A JSON object written field by field, in order, as nlohmann's compact dump
// writes an ordered_json of the same fields: a log line is written on every
// call, and building the object first took a fifth of a small call's CPU.
class JsonObject {
 public:
  void String(absl::string_view key, absl::string_view value) {
    Key(key);
    AppendJsonString(value, text_);
  }
  void Int(absl::string_view key, int64_t value) {
    Key(key);
    absl::StrAppend(&text_, value);
  }
  void Ints(absl::string_view key, const std::vector<int64_t>& values) {
    Key(key);
    absl::StrAppend(&text_, "[", absl::StrJoin(values, ","), "]");
  }
  void Object(absl::string_view key, JsonObject value) {
    Key(key);
    text_ += std::move(value).Close();
  }
  std::string Close() && {
    text_ += text_.empty() ? "{}" : "}";
    return std::move(text_);
  }

 private:
  void Key(absl::string_view key) {
    text_ += text_.empty() ? '{' : ',';
    AppendJsonString(key, text_);
    text_ += ':';
  }

  std::string text_;
};

// The logged sizes of `record`'s inputs: the first kMaxLoggedInputs, each
// list cut past kMaxLoggedEntries.
JsonObject LoggedSizes(const CallRecord& record) {
  JsonObject sizes;
  const size_t logged = std::min(record.sizes.size(), kMaxLoggedInputs);
  for (size_t i = 0; i < logged; ++i) {
    const auto& [name, dims] = record.sizes[i];
    const int64_t length = i < record.sizes_lengths.size() ? record.sizes_lengths[i]
                                                           : static_cast<int64_t>(dims.size());
    if (length <= static_cast<int64_t>(kMaxLoggedEntries) && dims.size() <= kMaxLoggedEntries) {
      sizes.Ints(Cut(name, kMaxLoggedIdBytes), dims);
    } else {
      // "[1,1,...(60000000 entries)]"
      std::string cut = "[";
      for (size_t d = 0; d < 2 && d < dims.size(); ++d) absl::StrAppend(&cut, dims[d], ",");
      absl::StrAppend(&cut, "...(", std::max<int64_t>(length, static_cast<int64_t>(dims.size())),
                      " entries)]");
      sizes.String(Cut(name, kMaxLoggedIdBytes), cut);
    }
  }
  const int64_t inputs =
      record.input_count >= 0 ? record.input_count : static_cast<int64_t>(record.sizes.size());
  if (inputs > static_cast<int64_t>(logged)) {
    sizes.String("...", absl::StrCat("(", inputs, " inputs)"));
  }
  return sizes;
}

}  // namespace

std::string FormatLogLine(const CallRecord& record, const absl::Status& status, absl::Time end) {
  JsonObject line;
  line.String("time", absl::FormatTime("%Y-%m-%d%ET%H:%M:%E6SZ", end, absl::UTCTimeZone()));
  line.String("level", LevelOf(status.code()));
  line.String("method", record.method);
  line.String("id", Cut(record.id, kMaxLoggedIdBytes + 32));  // DescribeRequest cut it already
  line.String("op", record.op);
  line.String("dtype", record.dtype);
  line.Object("sizes", LoggedSizes(record));
  line.String("backend", record.backend);
  line.Int("bytes_in", record.bytes_in);
  line.Int("bytes_out", record.bytes_out);
  line.Int("latency_us", absl::ToInt64Microseconds(end - record.start));
  line.String("status", absl::StatusCodeToString(status.code()));
  // Request ids and messages come from clients: invalid UTF-8 is replaced
  // rather than thrown on.
  if (!status.ok()) line.String("message", Cut(status.message(), kMaxLoggedMessageBytes));
  if (!record.peer.empty()) line.String("peer", Cut(record.peer, kMaxLoggedIdBytes));
  if (!record.identity.empty()) line.String("identity", record.identity);
  if (!record.trace.empty()) {
    line.String("trace_id", record.trace.trace_id);
    line.String("span_id", record.trace.span_id);
    line.String("parent_span_id", record.trace.parent_span_id);
  }
  return std::move(line).Close();
}

namespace {

// Where this log writes: stderr, or the descriptor stderr was before
// CaptureForeignStderr put a pipe in its place.
std::atomic<int> log_fd{STDERR_FILENO};
int LogFd() { return log_fd.load(std::memory_order_relaxed); }

std::string Now() {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone());
}

// Writes `lines` (each ending in a newline) with as few writes as the kernel
// takes, under a lock: stderr is unbuffered, and a line split over several
// writes could interleave with another's.
void WriteLines(absl::string_view lines) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const char* data = lines.data();
  size_t left = lines.size();
  while (left > 0) {
    ssize_t written = ::write(LogFd(), data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      return;  // nowhere to report a broken log
    }
    data += written;
    left -= static_cast<size_t>(written);
  }
}

void WriteLine(std::string line) {
  line.push_back('\n');
  WriteLines(line);
}

// The logger thread and its bounded queue of records waiting to be formatted.
class Logger {
 public:
  ~Logger() { Stop(); }

  void Push(const CallRecord& record, const absl::Status& status, absl::Time end) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!stopped_) {
        if (queue_.size() >= kLogQueueLength) {
          dropped_.fetch_add(1, std::memory_order_relaxed);
          return;
        }
        if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
        queue_.push_back({record, status, end});
        // The logger waits for the first line of a batch, and for a full one.
        if (queue_.size() == 1 || queue_.size() == kLogBatchLines) wake_.notify_one();
        return;
      }
    }
    WriteLine(FormatLogLine(record, status, end));  // after Stop(): at once
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopped_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  int64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    CallRecord record;
    absl::Status status;
    absl::Time end;
  };

  // Lines that come within kLogBatchDelay of a batch's first go out with it:
  // one wake of this thread and one write for them all, not one per call
  // (at 1 MiB calls a wake per call was about one of tensord's 13 extra
  // context switches per call over the bare baseline's).
  void Run() {
    int64_t reported = 0;
    std::deque<Entry> batch;
    std::string lines;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stopped_ || !queue_.empty(); });
        if (queue_.empty()) return;
        wake_.wait_for(lock, absl::ToChronoMicroseconds(kLogBatchDelay),
                       [this] { return stopped_ || queue_.size() >= kLogBatchLines; });
        batch.swap(queue_);
      }
      lines.clear();
      if (const int64_t dropped = dropped_.load(std::memory_order_relaxed); dropped > reported) {
        nlohmann::ordered_json line;
        line["time"] = Now();
        line["level"] = "warning";
        line["event"] = "log_dropped";
        line["lines"] = dropped - reported;
        absl::StrAppend(&lines, line.dump(), "\n");
        reported = dropped;
      }
      for (const Entry& entry : batch) {
        absl::StrAppend(&lines, FormatLogLine(entry.record, entry.status, entry.end), "\n");
      }
      batch.clear();
      WriteLines(lines);
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Entry> queue_;
  bool stopped_ = false;
  std::atomic<int64_t> dropped_{0};
  std::thread thread_;
};

Logger& TheLogger() {
  static Logger* logger = new Logger();  // never destroyed: FlushRequestLog stops it
  return *logger;
}

}  // namespace

absl::string_view LevelOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return "info";
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kAborted:
      return "error";
    default:
      return "warning";
  }
}

absl::StatusOr<RequestLogPolicy> ParseRequestLogPolicy(absl::string_view text) {
  using Mode = RequestLogPolicy::Mode;
  if (text == "all") return RequestLogPolicy{Mode::kAll, 1};
  if (text == "errors") return RequestLogPolicy{Mode::kErrors, 1};
  if (text == "off") return RequestLogPolicy{Mode::kOff, 1};
  int64_t every = 0;
  if (absl::string_view n = text; absl::ConsumePrefix(&n, "sample:") &&
                                  absl::SimpleAtoi(n, &every) && every >= 1 &&
                                  every <= 1'000'000'000) {
    return RequestLogPolicy{Mode::kSample, every};
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--request_log=", text, ": expected all, errors, sample:N (N in [1, 10^9]) or off"));
}

namespace {

std::atomic<int> policy_mode{static_cast<int>(RequestLogPolicy::Mode::kAll)};
std::atomic<int64_t> policy_every{1};
std::atomic<uint64_t> ok_calls{0};

// Whether the policy keeps the line of a call that ended with `code`.
bool Keeps(absl::StatusCode code) {
  switch (static_cast<RequestLogPolicy::Mode>(policy_mode.load(std::memory_order_relaxed))) {
    case RequestLogPolicy::Mode::kAll:
      return true;
    case RequestLogPolicy::Mode::kOff:
      return false;
    case RequestLogPolicy::Mode::kErrors:
      return code != absl::StatusCode::kOk;
    case RequestLogPolicy::Mode::kSample:
      if (code != absl::StatusCode::kOk) return true;
      return ok_calls.fetch_add(1, std::memory_order_relaxed) %
                 static_cast<uint64_t>(policy_every.load(std::memory_order_relaxed)) ==
             0;
  }
  return true;
}

}  // namespace

void SetRequestLogPolicy(const RequestLogPolicy& policy) {
  policy_every.store(policy.sample_every, std::memory_order_relaxed);
  policy_mode.store(static_cast<int>(policy.mode), std::memory_order_relaxed);
}

void LogCall(const CallRecord& record, const absl::Status& status, absl::Time end) {
  if (!Keeps(status.code())) return;
  TheLogger().Push(record, status, end);
}

void FlushRequestLog() { TheLogger().Stop(); }

int64_t DroppedLogLines() { return TheLogger().dropped(); }

void LogDeviceFailure(absl::string_view device, const absl::Status& status) {
  nlohmann::ordered_json line;
  line["time"] = Now();
  line["level"] = "error";
  line["event"] = "device_failure";
  line["device"] = device;
  line["status"] = absl::StatusCodeToString(status.code());
  line["message"] = status.message();
  line["action"] = "marked unhealthy; retrying on cpu";
  WriteLine(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void LogEvent(absl::string_view event, absl::string_view detail, absl::string_view level) {
  nlohmann::ordered_json line;
  line["time"] = Now();
  line["level"] = level;
  line["event"] = event;
  line["detail"] = detail;
  WriteLine(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void WriteToStderr(absl::string_view text) { WriteLines(text); }

void LogForeign(absl::string_view source, absl::string_view level, absl::string_view message) {
  nlohmann::ordered_json line;
  line["time"] = Now();
  line["level"] = level;
  line["source"] = source;
  line["message"] = Cut(absl::StripTrailingAsciiWhitespace(message), kMaxLoggedMessageBytes);
  WriteLine(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void CaptureForeignStderr() {
  if (!kCapturesForeignStderr) return;
  int ends[2];
  if (log_fd.load() != STDERR_FILENO || pipe2(ends, O_CLOEXEC) != 0) return;
  const int original = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  if (original < 0 || dup2(ends[1], STDERR_FILENO) < 0) {
    close(ends[0]);
    close(ends[1]);
    if (original >= 0) close(original);
    return;
  }
  close(ends[1]);
  log_fd.store(original);
  // Reads what others write until the process ends; a line is whatever came
  // before a newline (or 64 KiB of it).
  std::thread([read_end = ends[0]] {
    std::string pending;
    char buffer[4096];
    for (;;) {
      const ssize_t got = read(read_end, buffer, sizeof(buffer));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      pending.append(buffer, static_cast<size_t>(got));
      for (size_t newline;
           (newline = pending.find('\n')) != std::string::npos || pending.size() >= (64 << 10);) {
        const size_t end = newline == std::string::npos ? pending.size() : newline;
        const absl::string_view text(pending.data(), end);
        if (!absl::StripAsciiWhitespace(text).empty()) {
          const std::string lower = absl::AsciiStrToLower(text);
          LogForeign("stderr",
                     absl::StrContains(lower, "error")  ? "error"
                     : absl::StrContains(lower, "info") ? "info"
                                                        : "warning",
                     text);
        }
        pending.erase(0, newline == std::string::npos ? end : end + 1);
      }
    }
  }).detach();
}

}  // namespace tensorop::server
