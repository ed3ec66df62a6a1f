#include "server/telemetry/request_log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/set_ints.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::SetInts;

using ::testing::ElementsAre;

v1::RunRequest SliceOfSixteenFloats() {
  v1::RunRequest request;
  request.set_id("req-7");
  request.mutable_slice();
  v1::Tensor& input = (*request.mutable_inputs())["input"];
  input.set_dtype(v1::FLOAT32);
  SetInts(input.mutable_sizes(), {4, 4});
  input.set_data(std::string(64, '\0'));
  return request;
}

TEST(RequestLogTest, DescribeRequestTakesIdOpDtypeSizesAndBytes) {
  CallRecord record = DescribeRequest("Run", SliceOfSixteenFloats());
  EXPECT_EQ(record.method, "Run");
  EXPECT_EQ(record.id, "req-7");
  EXPECT_EQ(record.op, "slice");
  EXPECT_EQ(record.dtype, "float32");
  ASSERT_EQ(record.sizes.size(), 1u);
  EXPECT_EQ(record.sizes[0].first, "input");
  EXPECT_THAT(record.sizes[0].second, ElementsAre(4, 4));
  EXPECT_EQ(record.bytes_in, 64);
}

TEST(RequestLogTest, OkLineHasEveryFieldAndNoMessage) {
  CallRecord record = DescribeRequest("RunStream", SliceOfSixteenFloats());
  record.backend = "cpu";
  record.bytes_out = 16;
  record.start = absl::FromUnixMicros(1714564800'000000);
  const absl::Time end = record.start + absl::Microseconds(1234);
  const std::string line = FormatLogLine(record, absl::OkStatus(), end);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const nlohmann::json json = nlohmann::json::parse(line);
  EXPECT_EQ(json["time"], "2024-05-01T12:00:00.001234Z");
  EXPECT_EQ(json["method"], "RunStream");
  EXPECT_EQ(json["id"], "req-7");
  EXPECT_EQ(json["op"], "slice");
  EXPECT_EQ(json["dtype"], "float32");
  EXPECT_EQ(json["sizes"], nlohmann::json::parse(R"({"input":[4,4]})"));
  EXPECT_EQ(json["backend"], "cpu");
  EXPECT_EQ(json["bytes_in"], 64);
  EXPECT_EQ(json["bytes_out"], 16);
  EXPECT_EQ(json["latency_us"], 1234);
  EXPECT_EQ(json["status"], "OK");
  EXPECT_EQ(json["level"], "info");
  EXPECT_FALSE(json.contains("message"));
  EXPECT_FALSE(json.contains("peer"));  // unknown: left out
  record.peer = "ipv4:127.0.0.1:41234";
  EXPECT_EQ(nlohmann::json::parse(FormatLogLine(record, absl::OkStatus(), end))["peer"],
            "ipv4:127.0.0.1:41234");
}

// What the caller asked or did is a warning; what the server failed at, an error.
TEST(RequestLogTest, EveryLineHasALevelByWhoseFaultItIs) {
  EXPECT_EQ(LevelOf(absl::StatusCode::kOk), "info");
  for (absl::StatusCode code :
       {absl::StatusCode::kInvalidArgument, absl::StatusCode::kNotFound,
        absl::StatusCode::kResourceExhausted, absl::StatusCode::kCancelled,
        absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kUnauthenticated,
        absl::StatusCode::kFailedPrecondition, absl::StatusCode::kPermissionDenied}) {
    EXPECT_EQ(LevelOf(code), "warning") << absl::StatusCodeToString(code);
  }
  for (absl::StatusCode code : {absl::StatusCode::kInternal, absl::StatusCode::kUnavailable,
                                absl::StatusCode::kUnknown, absl::StatusCode::kDataLoss}) {
    EXPECT_EQ(LevelOf(code), "error") << absl::StatusCodeToString(code);
  }
  CallRecord record = DescribeRequest("Run", SliceOfSixteenFloats());
  const nlohmann::json json = nlohmann::json::parse(
      FormatLogLine(record, absl::InternalError("a kernel failed"), absl::Now()));
  EXPECT_EQ(json["level"], "error");
}

TEST(RequestLogTest, ThePolicyIsAllErrorsASampleOrOff) {
  using Mode = RequestLogPolicy::Mode;
  ASSERT_OK_AND_ASSIGN(RequestLogPolicy policy, ParseRequestLogPolicy("sample:100"));
  EXPECT_EQ(policy.mode, Mode::kSample);
  EXPECT_EQ(policy.sample_every, 100);
  EXPECT_EQ(ParseRequestLogPolicy("errors")->mode, Mode::kErrors);
  EXPECT_EQ(ParseRequestLogPolicy("off")->mode, Mode::kOff);
  EXPECT_EQ(ParseRequestLogPolicy("all")->mode, Mode::kAll);
  for (const char* bad : {"sample:0", "sample:", "sample:x", "some", "sample:1000000001"}) {
    EXPECT_THAT(ParseRequestLogPolicy(bad),
                ::tensorop::testing::StatusIs(
                    absl::StatusCode::kInvalidArgument,
                    absl::StrCat("--request_log=", bad,
                                 ": expected all, errors, sample:N (N in [1, 10^9]) or off")));
  }
}

TEST(RequestLogTest, ErrorLineNamesTheCodeAndCarriesTheMessage) {
  CallRecord record;
  record.method = "RunChunked";
  const std::string line = FormatLogLine(
      record, absl::DeadlineExceededError("deadline exceeded before the request finished"),
      record.start);
  const nlohmann::json json = nlohmann::json::parse(line);
  EXPECT_EQ(json["status"], "DEADLINE_EXCEEDED");
  EXPECT_EQ(json["message"], "deadline exceeded before the request finished");
  EXPECT_EQ(json["op"], "");
  EXPECT_EQ(json["sizes"], nlohmann::json::object());
}

TEST(RequestLogTest, InvalidUtf8FromClientsDoesNotBreakTheLine) {
  CallRecord record;
  record.method = "Run";
  record.id = "bad\xff id";
  const nlohmann::json json =
      nlohmann::json::parse(FormatLogLine(record, absl::OkStatus(), record.start));
  EXPECT_EQ(json["id"], "bad\xEF\xBF\xBD id");
}

// The line is written field by field: it must be exactly what nlohmann
// writes for the same fields, whatever bytes they hold. Parsed and dumped
// again, it is unchanged, and each field reads back as written.
TEST(RequestLogTest, ALineIsNlohmannsCompactJsonOfItsFieldsWhateverTheirBytes) {
  const std::vector<std::string> texts = {"",
                                          "plain-id_0.9",
                                          "quote\"back\\slash/",
                                          "tab\tnew\nline\x01\x1f",
                                          "del\x7f",
                                          "utf8 \xC3\xA9 \xE2\x98\x83",
                                          "bad\xff\xfe",
                                          std::string("nul\0in", 7)};
  // A field's text as nlohmann writes it (invalid UTF-8 replaced), read back.
  const auto as_dumped = [](const std::string& text) {
    return nlohmann::json::parse(
               nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
        .get<std::string>();
  };
  for (const std::string& text : texts) {
    CallRecord record;
    record.method = "Run";
    record.id = text;
    record.op = text;
    record.peer = text;
    record.sizes = {{text, {1, 2, 3}}, {"b", {}}};
    record.input_count = 5;
    record.bytes_in = -7;
    const absl::Status status = text.empty() ? absl::OkStatus() : absl::InvalidArgumentError(text);
    const std::string line = FormatLogLine(record, status, record.start + absl::Microseconds(12));
    const nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(line);
    EXPECT_EQ(parsed.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), line);
    EXPECT_EQ(parsed["id"].get<std::string>(), as_dumped(text));
    EXPECT_EQ(parsed["op"].get<std::string>(), as_dumped(text));
    EXPECT_EQ(parsed["sizes"].dump(),
              nlohmann::ordered_json({{as_dumped(text), {1, 2, 3}},
                                      {"b", nlohmann::ordered_json::array()},
                                      {"...", "(5 inputs)"}})
                  .dump());
    EXPECT_EQ(parsed["bytes_in"], -7);
    EXPECT_EQ(parsed["latency_us"], 12);
    EXPECT_EQ(parsed.contains("message"), !text.empty());
    EXPECT_EQ(parsed.contains("peer"), !text.empty());
  }
}

TEST(RequestLogTest, UnknownDtypeLeavesTheFieldEmpty) {
  v1::RunRequest request = SliceOfSixteenFloats();
  (*request.mutable_inputs())["input"].set_dtype(static_cast<v1::DType>(42));
  EXPECT_EQ(DescribeRequest("Run", request).dtype, "");
}

TEST(RequestLogTest, LongListsManyInputsAndLongIdsAreCut) {
  v1::RunRequest request = SliceOfSixteenFloats();
  request.set_id(std::string(100, 'x'));
  auto* sizes = (*request.mutable_inputs())["input"].mutable_sizes();
  sizes->Clear();
  for (int i = 0; i < 40; ++i) sizes->Add(1);
  for (int i = 0; i < 100; ++i) (*request.mutable_inputs())["z" + std::to_string(i)];
  const CallRecord record = DescribeRequest("Run", request);
  EXPECT_EQ(record.sizes.size(), kMaxLoggedInputs);
  EXPECT_EQ(record.input_count, 101);
  const nlohmann::json json = nlohmann::json::parse(
      FormatLogLine(record, absl::InvalidArgumentError(std::string(5000, 'm')), record.start));
  EXPECT_EQ(json["id"], std::string(64, 'x') + "...(100 bytes)");
  EXPECT_EQ(json["sizes"]["input"], "[1,1,...(40 entries)]");
  EXPECT_EQ(json["sizes"]["..."], "(101 inputs)");
  EXPECT_EQ(json["sizes"].size(), kMaxLoggedInputs + 1);
  EXPECT_EQ(json["message"], std::string(1024, 'm') + "...(5000 bytes)");
  EXPECT_EQ(record.bytes_in, 64);
}

// Points this process's stderr at a file while alive, and gives the old one back.
class CapturedStderr {
 public:
  // A file of its own: tests run side by side in one temporary folder.
  CapturedStderr() : path_(::testing::TempDir() + "request_log_stderr_XXXXXX") {
    std::fflush(stderr);
    saved_ = dup(STDERR_FILENO);
    const int file = mkstemp(path_.data());
    dup2(file, STDERR_FILENO);
    close(file);
  }
  ~CapturedStderr() {
    dup2(saved_, STDERR_FILENO);
    close(saved_);
    unlink(path_.c_str());
  }
  // The whole lines written so far (not one still being written).
  std::vector<std::string> Lines() const {
    std::ifstream file(path_);
    std::stringstream text;
    text << file.rdbuf();
    std::vector<std::string> lines = absl::StrSplit(text.str(), '\n');
    lines.pop_back();  // after the last newline
    return lines;
  }

 private:
  std::string path_;
  int saved_ = -1;
};

CallRecord RecordWithId(std::string id) {
  CallRecord record;
  record.method = "Run";
  record.id = std::move(id);
  return record;
}

TEST(RequestLogTest, LinesFromManyThreadsAreWrittenWholeAndInTheirOrderByTheFlush) {
  constexpr int kThreads = 4;
  constexpr int kLinesEach = 300;  // 1200 together: within kLogQueueLength, none dropped
  CapturedStderr captured;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kLinesEach; ++i) {
        LogCall(RecordWithId(absl::StrCat(t, ":", i)), absl::OkStatus());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  FlushRequestLog();
  const std::vector<std::string> lines = captured.Lines();
  ASSERT_EQ(lines.size(), static_cast<size_t>(kThreads * kLinesEach));
  std::vector<int> next(kThreads, 0);
  for (const std::string& line : lines) {
    const nlohmann::json json = nlohmann::json::parse(line);  // whole: it parses
    const std::string id = json["id"];
    const int t = id[0] - '0';
    ASSERT_EQ(id, absl::StrCat(t, ":", next[t])) << "out of order in " << line;
    ++next[t];
    EXPECT_EQ(json["method"], "Run");
    EXPECT_EQ(json["status"], "OK");
  }
  EXPECT_EQ(DroppedLogLines(), 0);
}

TEST(RequestLogTest, ALoneLineIsWrittenWithoutWaitingForMore) {
  CapturedStderr captured;
  LogCall(RecordWithId("alone"), absl::NotFoundError("no such handle"));
  // Written once kLogBatchDelay passed with no other line; looked for up to
  // 30 s, a bound far above that delay for a loaded machine.
  std::vector<std::string> lines;
  for (int tries = 0; tries < 3000 && lines.empty(); ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    lines = captured.Lines();
  }
  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json json = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(json["id"], "alone");
  EXPECT_EQ(json["status"], "NOT_FOUND");
  EXPECT_EQ(json["message"], "no such handle");
}

TEST(RequestLogTest, ForeignMessagesAreLinesOfTheirOwnCut) {
  const std::string long_message(5000, 'x');
  CapturedStderr captured;
  LogForeign("grpc", "error", "Handshake failed\n");
  LogForeign("stderr", "warning", long_message);
  const std::vector<std::string> lines = captured.Lines();
  ASSERT_EQ(lines.size(), 2u);
  const nlohmann::json first = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(first["level"], "error");
  EXPECT_EQ(first["source"], "grpc");
  EXPECT_EQ(first["message"], "Handshake failed");
  EXPECT_TRUE(first.contains("time"));
  const std::string cut = nlohmann::json::parse(lines[1])["message"];
  EXPECT_EQ(cut, absl::StrCat(std::string(kMaxLoggedMessageBytes, 'x'), "...(5000 bytes)"));
}

}  // namespace
}  // namespace tensorop::server
