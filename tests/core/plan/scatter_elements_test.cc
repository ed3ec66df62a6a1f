// ScatterElements planning (core/plan/scatter_elements.h): a copy of the input
// into the output, then one walk over the updates in row-major order.
#include "core/plan/scatter_elements.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/attrs.h"
#include "core/limits.h"
#include "core/plan/plan.h"
#include "core/tensor.h"
#include "core/validate/scatter_elements.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace tensorop {
namespace {

using ::testing::ElementsAre;

// A zero-filled tensor (zero is a valid index for every axis).
struct OwnedTensor {
  TensorDesc desc;
  std::vector<std::byte> bytes;
  TensorView view() const { return TensorView{desc, bytes}; }
};

OwnedTensor ZeroTensor(DType dtype, std::vector<int64_t> sizes, std::vector<int64_t> strides = {},
                       int64_t buffer_elements = -1) {
  if (buffer_elements < 0) {
    buffer_elements = 1;
    for (int64_t size : sizes) buffer_elements *= size;
  }
  OwnedTensor tensor;
  tensor.bytes.assign(static_cast<size_t>(buffer_elements * ElementSize(dtype)), std::byte{0});
  tensor.desc = TensorDesc{dtype, std::move(sizes), std::move(strides)};
  return tensor;
}

class ScatterElementsPlanTest : public ::testing::Test {
 protected:
  // Default: input float32 [3, 4], indices int64 [2, 4], updates float32 [2, 4].
  ScatterElementsPlanTest()
      : input_(ZeroTensor(DType::kFloat32, {3, 4})),
        indices_(ZeroTensor(DType::kInt64, {2, 4})),
        updates_(ZeroTensor(DType::kFloat32, {2, 4})) {}

  void Plan(int64_t axis, std::vector<OutputDesc> outputs = {}) {
    ASSERT_OK_AND_ASSIGN(
        ScatterElementsGeometry geometry,
        ValidateScatterElements(ScatterElementsAttrs{axis}, input_.view(), indices_.view(),
                                updates_.view(), outputs, Limits{}));
    plan_ = PlanScatterElements(geometry);
    ASSERT_EQ(plan_.copies.size(), 1u);
    ASSERT_EQ(plan_.scatters.size(), 1u);
    walk_ = plan_.scatters[0];
  }

  OwnedTensor input_;
  OwnedTensor indices_;
  OwnedTensor updates_;
  ExecutionPlan plan_;
  ScatterWalk walk_;
};

TEST_F(ScatterElementsPlanTest, PlanNamesThreeInputsAndOneOutput) {
  Plan(0);
  EXPECT_EQ(plan_.op, "scatter_elements");
  EXPECT_THAT(plan_.input_names, ElementsAre("input", "indices", "updates"));
  ASSERT_EQ(plan_.outputs.size(), 1u);
  EXPECT_THAT(plan_.outputs[0].sizes, ElementsAre(3, 4));
  EXPECT_EQ(plan_.outputs[0].dtype, DType::kFloat32);
  EXPECT_EQ(walk_.indices_slot, 1);
  EXPECT_EQ(walk_.updates_slot, 2);
  EXPECT_EQ(walk_.output_slot, 0);
}

TEST_F(ScatterElementsPlanTest, InputIsCopiedWholeIntoTheOutputFirst) {
  Plan(0);
  const StridedCopy& copy = plan_.copies[0];
  EXPECT_EQ(copy.input_slot, 0);
  EXPECT_EQ(copy.output_slot, 0);
  EXPECT_EQ(copy.src_offset, 0);
  EXPECT_EQ(copy.element_count, 12);
  EXPECT_THAT(copy.sizes, ElementsAre(12));
  EXPECT_THAT(copy.src_strides, ElementsAre(4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(4));
}

TEST_F(ScatterElementsPlanTest, OuterAxisWalkHasNoOutputStrideAlongTheAxis) {
  Plan(0);
  EXPECT_EQ(walk_.element_size, 4);
  EXPECT_EQ(walk_.index_size, 8);
  EXPECT_TRUE(walk_.index_signed);
  EXPECT_EQ(walk_.axis_size, 3);
  EXPECT_EQ(walk_.element_count, 8);
  EXPECT_THAT(walk_.sizes, ElementsAre(2, 4));
  EXPECT_THAT(walk_.indices_strides, ElementsAre(4 * 8, 8));
  EXPECT_THAT(walk_.updates_strides, ElementsAre(4 * 4, 4));
  EXPECT_THAT(walk_.output_strides, ElementsAre(0, 4));
  EXPECT_EQ(walk_.output_axis_stride, 4 * 4);
  EXPECT_EQ(walk_.axis_dim, 0);
  // Blocks split the outermost dimension that is not the axis.
  EXPECT_EQ(walk_.partition_dim, 1);
}

TEST_F(ScatterElementsPlanTest, InnerAxisWalkPartitionsTheRows) {
  input_ = ZeroTensor(DType::kFloat64, {3, 4});
  indices_ = ZeroTensor(DType::kInt32, {3, 2});
  updates_ = ZeroTensor(DType::kFloat64, {3, 2});
  Plan(1);
  EXPECT_EQ(walk_.element_size, 8);
  EXPECT_EQ(walk_.index_size, 4);
  EXPECT_TRUE(walk_.index_signed);
  EXPECT_EQ(walk_.axis_size, 4);
  EXPECT_EQ(walk_.element_count, 6);
  EXPECT_THAT(walk_.sizes, ElementsAre(3, 2));
  EXPECT_THAT(walk_.indices_strides, ElementsAre(2 * 4, 4));
  EXPECT_THAT(walk_.updates_strides, ElementsAre(2 * 8, 8));
  EXPECT_THAT(walk_.output_strides, ElementsAre(4 * 8, 0));
  EXPECT_EQ(walk_.output_axis_stride, 8);
  EXPECT_EQ(walk_.axis_dim, 1);
  EXPECT_EQ(walk_.partition_dim, 0);
}

TEST_F(ScatterElementsPlanTest, UnsignedIndexDtypesAreMarkedUnsigned) {
  indices_ = ZeroTensor(DType::kUint32, {2, 4});
  Plan(0);
  EXPECT_FALSE(walk_.index_signed);
  EXPECT_EQ(walk_.index_size, 4);

  indices_ = ZeroTensor(DType::kUint64, {2, 4});
  Plan(0);
  EXPECT_FALSE(walk_.index_signed);
  EXPECT_EQ(walk_.index_size, 8);
}

TEST_F(ScatterElementsPlanTest, SizeOneDimensionsAreDroppedFromTheWalk) {
  input_ = ZeroTensor(DType::kFloat32, {2, 1, 5});
  indices_ = ZeroTensor(DType::kUint32, {2, 1, 3});
  updates_ = ZeroTensor(DType::kFloat32, {2, 1, 3});
  Plan(2);
  EXPECT_EQ(walk_.axis_size, 5);
  EXPECT_EQ(walk_.element_count, 6);
  EXPECT_THAT(walk_.sizes, ElementsAre(2, 3));
  EXPECT_THAT(walk_.indices_strides, ElementsAre(3 * 4, 4));
  EXPECT_THAT(walk_.updates_strides, ElementsAre(3 * 4, 4));
  EXPECT_THAT(walk_.output_strides, ElementsAre(5 * 4, 0));
  EXPECT_EQ(walk_.output_axis_stride, 4);
  EXPECT_EQ(walk_.axis_dim, 1);
  EXPECT_EQ(walk_.partition_dim, 0);
}

TEST_F(ScatterElementsPlanTest, SizeOneAxisIsDroppedFromTheWalk) {
  indices_ = ZeroTensor(DType::kInt32, {1, 4});
  updates_ = ZeroTensor(DType::kFloat32, {1, 4});
  Plan(0);
  EXPECT_THAT(walk_.sizes, ElementsAre(4));
  EXPECT_THAT(walk_.output_strides, ElementsAre(4));
  EXPECT_EQ(walk_.output_axis_stride, 16);
  EXPECT_EQ(walk_.axis_dim, -1);
  EXPECT_EQ(walk_.partition_dim, 0);
}

TEST_F(ScatterElementsPlanTest, SizeOneOutputAxisMayHaveAnyStride) {
  // A size-1 dimension's stride addresses nothing, so any value >= 1 is valid.
  input_ = ZeroTensor(DType::kFloat32, {1, 4});
  indices_ = ZeroTensor(DType::kInt32, {1, 4});
  updates_ = ZeroTensor(DType::kFloat32, {1, 4});
  Plan(0, {OutputDesc{{1, 4}, {std::numeric_limits<int64_t>::max(), 1}}});
  EXPECT_THAT(walk_.sizes, ElementsAre(4));
  EXPECT_THAT(walk_.output_strides, ElementsAre(4));
  EXPECT_THAT(plan_.copies[0].dst_strides, ElementsAre(4));
}

TEST_F(ScatterElementsPlanTest, OnlyTheAxisLeftMeansOneBlock) {
  input_ = ZeroTensor(DType::kFloat32, {3, 1});
  indices_ = ZeroTensor(DType::kInt32, {5, 1});
  updates_ = ZeroTensor(DType::kFloat32, {5, 1});
  Plan(0);
  EXPECT_THAT(walk_.sizes, ElementsAre(5));
  EXPECT_THAT(walk_.output_strides, ElementsAre(0));
  EXPECT_EQ(walk_.axis_dim, 0);
  EXPECT_EQ(walk_.partition_dim, -1);
}

TEST_F(ScatterElementsPlanTest, RankOneIsOneBlock) {
  input_ = ZeroTensor(DType::kUint8, {5});
  indices_ = ZeroTensor(DType::kInt64, {7});
  updates_ = ZeroTensor(DType::kUint8, {7});
  Plan(0);
  EXPECT_EQ(walk_.element_size, 1);
  EXPECT_THAT(walk_.sizes, ElementsAre(7));
  EXPECT_THAT(walk_.indices_strides, ElementsAre(8));
  EXPECT_THAT(walk_.updates_strides, ElementsAre(1));
  EXPECT_THAT(walk_.output_strides, ElementsAre(0));
  EXPECT_EQ(walk_.output_axis_stride, 1);
  EXPECT_EQ(walk_.axis_dim, 0);
  EXPECT_EQ(walk_.partition_dim, -1);
}

TEST_F(ScatterElementsPlanTest, StridedTensorsGiveTheirOwnByteStrides) {
  indices_ = ZeroTensor(DType::kInt32, {2, 4}, {5, 1}, 9);    // padded rows
  updates_ = ZeroTensor(DType::kFloat32, {2, 4}, {1, 2}, 8);  // column-major
  Plan(0, {OutputDesc{{3, 4}, {1, 3}}});                      // column-major output
  EXPECT_THAT(walk_.sizes, ElementsAre(2, 4));
  EXPECT_THAT(walk_.indices_strides, ElementsAre(5 * 4, 1 * 4));
  EXPECT_THAT(walk_.updates_strides, ElementsAre(1 * 4, 2 * 4));
  EXPECT_THAT(walk_.output_strides, ElementsAre(0, 3 * 4));
  EXPECT_EQ(walk_.output_axis_stride, 1 * 4);
  EXPECT_EQ(walk_.axis_dim, 0);

  const StridedCopy& copy = plan_.copies[0];
  EXPECT_THAT(copy.sizes, ElementsAre(3, 4));
  EXPECT_THAT(copy.src_strides, ElementsAre(16, 4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(4, 12));
}

}  // namespace
}  // namespace tensorop
