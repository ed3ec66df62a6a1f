// The steps of one call through the pipeline (server/pipeline/call_context.h),
// each on its own: admission, reservation, output binding and execution.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/call_context.h"
#include "tests/server/pipeline/pipeline_fixture.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using CallStepsTest = PipelineTest;

// An AdmitFn saying the answer takes `bytes`, noting the plans it was shown.
AdmitFn AdmitTaking(int64_t bytes, std::vector<std::vector<int64_t>>* shown = nullptr) {
  return [bytes, shown](const ExecutionPlan& plan) -> absl::StatusOr<int64_t> {
    if (shown != nullptr) {
      for (const Layout& output : plan.outputs) shown->push_back(output.sizes);
    }
    return bytes;
  };
}

TEST_F(CallStepsTest, AdmissionPlansTheRequestAndShowsThePlanToTheSink) {
  const v1::RunRequest request = TwoByThreeSliceRequest();
  Placement placement = CpuPlacement();
  MemoryBudget::Reservation reservation = budget_.Empty();
  std::vector<std::vector<int64_t>> shown;
  ASSERT_OK_AND_ASSIGN(Admission admission,
                       Admit(Call(request, placement, reservation), AdmitTaking(100, &shown)));
  ASSERT_NE(admission.planned_here, nullptr);
  EXPECT_EQ(admission.run, admission.planned_here.get());
  EXPECT_EQ(admission.answer_bytes, 100);
  EXPECT_EQ(admission.pinned, -1);  // no input on a device
  EXPECT_THAT(shown, ElementsAre(ElementsAre(2, 2)));
  EXPECT_EQ(reservation.bytes(), 0);  // admission reserves nothing
}

TEST_F(CallStepsTest, AdmissionStopsAStoppedCallBeforePlanningAndPassesOnARefusal) {
  const v1::RunRequest request = TwoByThreeSliceRequest();
  Placement placement = CpuPlacement();
  MemoryBudget::Reservation reservation = budget_.Empty();
  const StopCheck cancelled = [] { return absl::CancelledError("the client cancelled the call"); };
  std::vector<std::vector<int64_t>> shown;
  EXPECT_THAT(Admit(Call(request, placement, reservation, cancelled), AdmitTaking(0, &shown)),
              StatusIs(absl::StatusCode::kCancelled, "the client cancelled the call"));
  EXPECT_THAT(shown, ::testing::IsEmpty());
  const AdmitFn refuse = [](const ExecutionPlan&) -> absl::StatusOr<int64_t> {
    return absl::ResourceExhaustedError("the answer is too big");
  };
  EXPECT_THAT(Admit(Call(request, placement, reservation), refuse),
              StatusIs(absl::StatusCode::kResourceExhausted, "the answer is too big"));
}

TEST_F(CallStepsTest, ReservationTakesTheOutputsAndTheAnswerAndStopsAtTheBudget) {
  const v1::RunRequest request = TwoByThreeSliceRequest();
  Placement placement = CpuPlacement();
  MemoryBudget::Reservation reservation = budget_.Empty();
  const CallContext call = Call(request, placement, reservation);
  ASSERT_OK_AND_ASSIGN(Admission admission, Admit(call, AdmitTaking(100)));
  ASSERT_OK_AND_ASSIGN(const std::vector<opencl_backend::ResidentInput> resident,
                       ReserveAndResolveInputs(call, admission));
  ASSERT_EQ(resident.size(), 1u);
  EXPECT_EQ(resident[0].buffer, nullptr);  // read from its host bytes
  EXPECT_EQ(reservation.bytes(), 2 * 2 * 4 + 100);

  MemoryBudget small(2 * 2 * 4 + 99);
  MemoryBudget::Reservation short_of_one = small.Empty();
  const CallContext tight = Call(request, placement, short_of_one);
  ASSERT_OK_AND_ASSIGN(Admission admitted, Admit(tight, AdmitTaking(100)));
  EXPECT_THAT(ReserveAndResolveInputs(tight, admitted),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("the outputs of request"), HasSubstr("slice-1"))));
  EXPECT_EQ(short_of_one.bytes(), 0);
}

TEST_F(CallStepsTest, BindingAsksForEachOutputInOrderAndRefusesAKeepWithNowhereToKeep) {
  v1::RunRequest request = TwoByThreeSliceRequest();
  Placement placement = CpuPlacement();
  MemoryBudget::Reservation reservation = budget_.Empty();
  std::byte buffer[16];
  std::vector<std::vector<int64_t>> asked;
  const AllocateFn allocate = [&](const Layout& layout,
                                  std::byte* elsewhere) -> absl::StatusOr<std::byte*> {
    EXPECT_EQ(elsewhere, nullptr);  // no region, nothing kept
    asked.push_back(layout.sizes);
    return buffer;
  };
  {
    const CallContext call = Call(request, placement, reservation);
    ASSERT_OK_AND_ASSIGN(Admission admission, Admit(call, AdmitTaking(0)));
    ASSERT_OK_AND_ASSIGN(BoundOutputs bound, BindOutputs(call, admission, allocate));
    EXPECT_THAT(bound.outputs, ElementsAre(buffer));
    EXPECT_THAT(bound.resident, ElementsAre(nullptr));
    ASSERT_EQ(bound.pending.size(), 1u);
    EXPECT_FALSE(bound.pending[0]);
    EXPECT_THAT(asked, ElementsAre(ElementsAre(2, 2)));
  }
  request.mutable_outputs(0)->set_keep(true);
  const CallContext keeping = Call(request, placement, reservation);
  ASSERT_OK_AND_ASSIGN(Admission admission, Admit(keeping, AdmitTaking(0)));
  EXPECT_THAT(BindOutputs(keeping, admission, allocate),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "outputs[0].keep: this call does not keep outputs"));
}

TEST_F(CallStepsTest, ExecutionWritesTheBoundOutputsOnThePlacementsBackend) {
  const v1::RunRequest request = TwoByThreeSliceRequest();
  Placement placement = CpuPlacement();
  MemoryBudget::Reservation reservation = budget_.Empty();
  std::vector<int32_t> written(4, -1);
  KeptOutputs kept;
  const absl::Status status = OnWorker([&]() -> absl::Status {
    const CallContext call = Call(request, placement, reservation);
    ASSIGN_OR_RETURN(Admission admission, Admit(call, AdmitTaking(0)));
    ASSIGN_OR_RETURN(const std::vector<opencl_backend::ResidentInput> resident,
                     ReserveAndResolveInputs(call, admission));
    ASSIGN_OR_RETURN(
        BoundOutputs bound,
        BindOutputs(call, admission, [&](const Layout&, std::byte*) -> absl::StatusOr<std::byte*> {
          return reinterpret_cast<std::byte*>(written.data());
        }));
    return ExecuteBound(call, admission, resident, bound, nullptr, &kept);
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_THAT(written, ElementsAre(1, 2, 4, 5));
  EXPECT_EQ(placement.device, Device::kCpu);
  EXPECT_THAT(kept, ElementsAre(nullptr));  // nothing kept
}

}  // namespace
}  // namespace tensorop::server
