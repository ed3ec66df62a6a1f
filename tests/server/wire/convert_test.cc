#include "server/wire/convert.h"

#include <cstdint>
#include <string>
#include <variant>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/set_ints.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::SetInts;

using ::tensorop::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::SizeIs;

v1::Tensor Tensor(v1::DType dtype, std::initializer_list<int64_t> sizes, std::string data) {
  v1::Tensor tensor;
  tensor.set_dtype(dtype);
  tensor.mutable_sizes()->Assign(sizes.begin(), sizes.end());
  tensor.set_data(std::move(data));
  return tensor;
}

v1::RunRequest ScatterRequest() {
  v1::RunRequest request;
  request.mutable_scatter_elements()->set_axis(1);
  (*request.mutable_inputs())["updates"] = Tensor(v1::FLOAT32, {1, 1}, std::string(4, 'u'));
  (*request.mutable_inputs())["input"] = Tensor(v1::FLOAT32, {2, 2}, std::string(16, 'i'));
  (*request.mutable_inputs())["indices"] = Tensor(v1::INT64, {1, 1}, std::string(8, 'x'));
  return request;
}

TEST(ToDTypeTest, EveryNamedDtypeConverts) {
  for (DType dtype : kAllDTypes) {
    absl::StatusOr<DType> converted = ToDType(static_cast<int>(dtype), "input.dtype");
    ASSERT_TRUE(converted.ok()) << converted.status();
    EXPECT_EQ(*converted, dtype);
    EXPECT_EQ(static_cast<int>(ToProtoDType(dtype)), static_cast<int>(dtype));
  }
}

TEST(ToDTypeTest, UnspecifiedIsNamedWithItsEnumName) {
  EXPECT_THAT(ToDType(v1::DTYPE_UNSPECIFIED, "indices.dtype"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "indices.dtype: 0 (DTYPE_UNSPECIFIED) is not a dtype"));
}

TEST(ToDTypeTest, ValueOutsideTheEnumIsNamed) {
  EXPECT_THAT(ToDType(42, "input.dtype"),
              StatusIs(absl::StatusCode::kInvalidArgument, "input.dtype: 42 is not a dtype"));
  EXPECT_THAT(ToDType(-1, "updates.dtype"),
              StatusIs(absl::StatusCode::kInvalidArgument, "updates.dtype: -1 is not a dtype"));
}

TEST(ToOpRequestTest, ViewsPointIntoTheProtoWithoutCopying) {
  const v1::RunRequest request = ScatterRequest();
  ASSERT_OK_AND_ASSIGN(OpRequest op, ToOpRequest(request));
  ASSERT_THAT(op.inputs, SizeIs(3));
  for (const NamedTensor& input : op.inputs) {
    const std::string& data = request.inputs().at(input.name).data();
    EXPECT_EQ(static_cast<const void*>(input.tensor.data.data()),
              static_cast<const void*>(data.data()))
        << input.name;
    EXPECT_EQ(input.tensor.data.size(), data.size()) << input.name;
  }
}

TEST(ToOpRequestTest, InputsComeInNameOrderWithTheirDescriptions) {
  ASSERT_OK_AND_ASSIGN(OpRequest op, ToOpRequest(ScatterRequest()));
  ASSERT_THAT(op.inputs, SizeIs(3));
  EXPECT_EQ(op.inputs[0].name, "indices");
  EXPECT_EQ(op.inputs[0].tensor.desc.dtype, DType::kInt64);
  EXPECT_EQ(op.inputs[1].name, "input");
  EXPECT_THAT(op.inputs[1].tensor.desc.sizes, ElementsAre(2, 2));
  EXPECT_TRUE(op.inputs[1].tensor.desc.strides.empty());
  EXPECT_EQ(op.inputs[2].name, "updates");
  ASSERT_TRUE(std::holds_alternative<ScatterElementsAttrs>(op.attrs));
  EXPECT_EQ(std::get<ScatterElementsAttrs>(op.attrs).axis, 1);
}

TEST(ToOpRequestTest, BadDtypeIsNamedByItsInput) {
  v1::RunRequest request = ScatterRequest();
  (*request.mutable_inputs())["indices"].set_dtype(v1::DTYPE_UNSPECIFIED);
  EXPECT_THAT(ToOpRequest(request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "indices.dtype: 0 (DTYPE_UNSPECIFIED) is not a dtype"));
}

TEST(ToOpRequestTest, MissingOpIsInvalid) {
  v1::RunRequest request = ScatterRequest();
  request.clear_op();
  EXPECT_THAT(ToOpRequest(request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "op: none of slice, strided_slice, split, scatter_elements, transpose, "
                       "reshape, expand, tile, gather, gather_elements, join, pad is set"));
}

TEST(ToOpRequestTest, SliceAttrsStridesAndOutputsCarryOver) {
  v1::RunRequest request;
  v1::SliceAttrs* slice = request.mutable_slice();
  SetInts(slice->mutable_offsets(), {0, 1});
  SetInts(slice->mutable_window_sizes(), {2, 3});
  SetInts(slice->mutable_window_strides(), {1, -2});
  v1::Tensor input = Tensor(v1::UINT16, {2, 4}, std::string(16, '\0'));
  SetInts(input.mutable_strides(), {4, 1});
  (*request.mutable_inputs())["input"] = input;
  v1::OutputDesc* output = request.add_outputs();
  SetInts(output->mutable_sizes(), {2, 2});
  SetInts(output->mutable_strides(), {1, 2});

  ASSERT_OK_AND_ASSIGN(OpRequest op, ToOpRequest(request));
  ASSERT_TRUE(std::holds_alternative<SliceAttrs>(op.attrs));
  const SliceAttrs& attrs = std::get<SliceAttrs>(op.attrs);
  EXPECT_THAT(attrs.offsets, ElementsAre(0, 1));
  EXPECT_THAT(attrs.window_sizes, ElementsAre(2, 3));
  EXPECT_THAT(attrs.window_strides, ElementsAre(1, -2));
  ASSERT_THAT(op.inputs, SizeIs(1));
  EXPECT_EQ(op.inputs[0].tensor.desc.dtype, DType::kUint16);
  EXPECT_THAT(op.inputs[0].tensor.desc.strides, ElementsAre(4, 1));
  ASSERT_THAT(op.outputs, SizeIs(1));
  EXPECT_THAT(op.outputs[0].sizes, ElementsAre(2, 2));
  EXPECT_THAT(op.outputs[0].strides, ElementsAre(1, 2));
}

TEST(ToOpRequestTest, StridedSliceMasksCarryOver) {
  v1::RunRequest request;
  v1::StridedSliceAttrs* attrs = request.mutable_strided_slice();
  SetInts(attrs->mutable_begin(), {1, 0});
  SetInts(attrs->mutable_end(), {3, 0});
  SetInts(attrs->mutable_stride(), {1, -1});
  SetInts(attrs->mutable_begin_mask(), {0, 1});
  SetInts(attrs->mutable_end_mask(), {0, 1});
  SetInts(attrs->mutable_new_axis_mask(), {0});
  SetInts(attrs->mutable_shrink_axis_mask(), {0, 0, 1});
  SetInts(attrs->mutable_ellipsis_mask(), {});
  (*request.mutable_inputs())["input"] = Tensor(v1::INT8, {4, 4}, std::string(16, '\0'));

  ASSERT_OK_AND_ASSIGN(OpRequest op, ToOpRequest(request));
  ASSERT_TRUE(std::holds_alternative<StridedSliceAttrs>(op.attrs));
  const StridedSliceAttrs& converted = std::get<StridedSliceAttrs>(op.attrs);
  EXPECT_THAT(converted.begin, ElementsAre(1, 0));
  EXPECT_THAT(converted.end, ElementsAre(3, 0));
  EXPECT_THAT(converted.stride, ElementsAre(1, -1));
  EXPECT_THAT(converted.begin_mask, ElementsAre(0, 1));
  EXPECT_THAT(converted.end_mask, ElementsAre(0, 1));
  EXPECT_THAT(converted.new_axis_mask, ElementsAre(0));
  EXPECT_THAT(converted.shrink_axis_mask, ElementsAre(0, 0, 1));
  EXPECT_TRUE(converted.ellipsis_mask.empty());
}

TEST(ToOpRequestTest, SplitAxisCarriesOver) {
  v1::RunRequest request;
  request.mutable_split()->set_axis(-3);  // core judges the value
  ASSERT_OK_AND_ASSIGN(OpRequest op, ToOpRequest(request));
  ASSERT_TRUE(std::holds_alternative<SplitAttrs>(op.attrs));
  EXPECT_EQ(std::get<SplitAttrs>(op.attrs).axis, -3);
  EXPECT_TRUE(op.inputs.empty());
}

TEST(ToProtoTensorTest, StridesAreAlwaysExplicit) {
  Layout layout{.dtype = DType::kInt16,
                .sizes = {2, 3},
                .strides = {3, 1},
                .element_count = 6,
                .buffer_elements = 6};
  const std::string bytes = "abcdefghijkl";
  v1::Tensor tensor;
  ToProtoTensor(layout, std::as_bytes(std::span(bytes.data(), bytes.size())), &tensor);
  EXPECT_EQ(tensor.dtype(), v1::INT16);
  EXPECT_THAT(tensor.sizes(), ElementsAre(2, 3));
  EXPECT_THAT(tensor.strides(), ElementsAre(3, 1));
  EXPECT_EQ(tensor.data(), bytes);
}

TEST(ToProtoTensorTest, RankZeroHasNoSizesAndNoStrides) {
  Layout layout{.dtype = DType::kFloat64,
                .sizes = {},
                .strides = {},
                .element_count = 1,
                .buffer_elements = 1};
  v1::Tensor tensor;
  SetTensorLayout(layout, &tensor);
  EXPECT_EQ(tensor.dtype(), v1::FLOAT64);
  EXPECT_EQ(tensor.sizes_size(), 0);
  EXPECT_EQ(tensor.strides_size(), 0);
}

TEST(OpCaseNameTest, NamesEachOp) {
  v1::RunRequest request;
  EXPECT_EQ(OpCaseName(request), "");
  request.mutable_slice();
  EXPECT_EQ(OpCaseName(request), "slice");
  request.mutable_strided_slice();
  EXPECT_EQ(OpCaseName(request), "strided_slice");
  request.mutable_split();
  EXPECT_EQ(OpCaseName(request), "split");
  request.mutable_scatter_elements();
  EXPECT_EQ(OpCaseName(request), "scatter_elements");
}

}  // namespace
}  // namespace tensorop::server
