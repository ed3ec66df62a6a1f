// Planning binds each input once to its source (server/pipeline/input_source.h):
// the request's own data, an upload, received pieces, a region, a host handle.
#include "server/pipeline/plan.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/data/handle_store.h"
#include "server/data/shared_memory.h"
#include "tests/server/pipeline/pipeline_fixture.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using Kind = InputSource::Kind;
using ::testing::Each;
using ::testing::Eq;

std::span<const std::byte> BytesOf(const std::string& bytes) {
  return std::as_bytes(std::span(bytes));
}

// The slice request with its input's data held apart: only its layout stays.
v1::RunRequest WithoutData() {
  v1::RunRequest request = TwoByThreeSliceRequest();
  (*request.mutable_inputs())["input"].clear_data();
  return request;
}

absl::StatusOr<std::unique_ptr<PlannedRun>> PlanWith(const v1::RunRequest& request,
                                                     const UploadedInputs* uploaded,
                                                     const HandleAccess* handles = nullptr,
                                                     SharedMemoryRegistry* regions = nullptr) {
  return Plan(request, Limits{}, regions, kNeverStop, uploaded, handles);
}

TEST(PlanTest, TheRequestsOwnDataIsReadWhereItIs) {
  const v1::RunRequest request = TwoByThreeSliceRequest();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlannedRun> run, PlanWith(request, nullptr));
  ASSERT_EQ(run->sources.size(), 1u);
  EXPECT_EQ(run->sources[0].kind, Kind::kInline);
  const std::string& data = request.inputs().at("input").data();
  EXPECT_EQ(run->sources[0].bytes.data(), BytesOf(data).data());
  EXPECT_EQ(run->inputs[0].data(), BytesOf(data).data());
  EXPECT_FALSE(ReadsFromDevice(*run));
}

TEST(PlanTest, AnUploadIsReadInItsOwnBuffer) {
  const std::string upload = Int32Bytes({0, 1, 2, 3, 4, 5});
  const UploadedInputs uploaded{{"input", InputSource::Uploaded(BytesOf(upload))}};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlannedRun> run, PlanWith(WithoutData(), &uploaded));
  ASSERT_EQ(run->sources.size(), 1u);
  EXPECT_EQ(run->sources[0].kind, Kind::kUploaded);
  EXPECT_EQ(run->inputs[0].data(), BytesOf(upload).data());
  EXPECT_EQ(run->inputs[0].size(), 24u);
}

TEST(PlanTest, ReceivedPiecesArePlannedWithZerosThenReadInPlaceOrGathered) {
  const std::string bytes = Int32Bytes({0, 1, 2, 3, 4, 5});
  const UploadedInputs uploaded{
      {"input", InputSource::Received({BytesOf(bytes).first(8), BytesOf(bytes).subspan(8)})}};
  MemoryBudget budget(1 << 20);

  // On the CPU the copies are cut at the pieces: the kernels read each
  // piece where it lies, through a slot of its own past the input's.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlannedRun> cut, PlanWith(WithoutData(), &uploaded));
  ASSERT_EQ(cut->sources.size(), 1u);
  EXPECT_EQ(cut->sources[0].kind, Kind::kReceived);
  EXPECT_EQ(cut->sources[0].pieces.size(), 2u);
  EXPECT_EQ(cut->inputs[0].size(), 24u);
  EXPECT_THAT(cut->inputs[0], Each(Eq(std::byte{0})));  // zeros standing in
  MemoryBudget::Reservation reservation = budget.Empty();
  ASSERT_OK(ReadPiecedInputs(*cut, /*on_cpu=*/true, reservation));
  ASSERT_EQ(cut->inputs.size(), 3u);
  EXPECT_EQ(cut->inputs[1].data(), BytesOf(bytes).data());
  EXPECT_EQ(cut->inputs[2].data(), BytesOf(bytes).data() + 8);
  EXPECT_EQ(budget.reserved(), 0);
  ASSERT_OK(ReadPiecedInputs(*cut, /*on_cpu=*/true, reservation));  // once only
  EXPECT_EQ(cut->inputs.size(), 3u);

  // Elsewhere they are gathered into one buffer, reserved while it lives.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlannedRun> gathered, PlanWith(WithoutData(), &uploaded));
  ASSERT_OK(ReadPiecedInputs(*gathered, /*on_cpu=*/false, reservation));
  ASSERT_EQ(gathered->inputs.size(), 1u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(gathered->inputs[0].data()),
                        gathered->inputs[0].size()),
            bytes);
  EXPECT_EQ(budget.reserved(), 24);
  gathered.reset();
  EXPECT_EQ(budget.reserved(), 0);
}

TEST(PlanTest, AHostHandleIsReadWhereItIsHeld) {
  HandleStoreOptions options;
  options.sweep_interval = absl::ZeroDuration();
  HandleStore store(options);
  const HandleCaller caller{.name = "peer:10.1.1.1", .authenticated = false};
  Layout layout;
  layout.dtype = DType::kInt32;
  layout.sizes = {2, 3};
  layout.strides = PackedStrides(layout.sizes);
  layout.element_count = 6;
  layout.buffer_elements = 6;
  ASSERT_OK_AND_ASSIGN(HandleStore::Pending pending, store.Reserve(caller, layout, "test"));
  const std::shared_ptr<const ResidentTensor> tensor = store.Commit(std::move(pending));
  v1::RunRequest request = WithoutData();
  (*request.mutable_inputs())["input"].mutable_handle()->set_id(tensor->id());
  const HandleAccess access{.store = &store, .caller = caller};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlannedRun> run, PlanWith(request, nullptr, &access));
  ASSERT_EQ(run->sources.size(), 1u);
  EXPECT_EQ(run->sources[0].kind, Kind::kHostHandle);
  EXPECT_EQ(run->inputs[0].data(), tensor->bytes().data());
  EXPECT_FALSE(ReadsFromDevice(*run));
}

TEST(PlanTest, ARegionsSpanIsReadInTheMapping) {
  char dir[] = "/tmp/tensorop-plan-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string object = std::string(dir) + "/obj";
  const std::string bytes = Int32Bytes({0, 1, 2, 3, 4, 5});
  const int fd = open(object.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fd);
  {
    SharedMemoryOptions options;
    options.directory = dir;
    options.idle_timeout = absl::ZeroDuration();
    SharedMemoryRegistry regions(options);
    ASSERT_OK(regions.Register("r", "/obj", 24).status());
    v1::RunRequest request = WithoutData();
    v1::SharedMemoryRef& span = *(*request.mutable_inputs())["input"].mutable_shared_memory();
    span.set_region("r");
    span.set_byte_length(24);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlannedRun> run,
                         PlanWith(request, nullptr, nullptr, &regions));
    ASSERT_EQ(run->sources.size(), 1u);
    EXPECT_EQ(run->sources[0].kind, Kind::kSharedMemory);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(run->inputs[0].data()), 24), bytes);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tensorop::server
