#include "server/wire/convert.h"

#include <algorithm>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/operator_info.h"
#include "core/status_macros.h"

namespace tensorop::server {
namespace {

std::vector<int64_t> ToVector(const google::protobuf::RepeatedField<int64_t>& values) {
  return std::vector<int64_t>(values.begin(), values.end());
}

OpAttrs ToSliceAttrs(const v1::SliceAttrs& slice) {
  return SliceAttrs{.offsets = ToVector(slice.offsets()),
                    .window_sizes = ToVector(slice.window_sizes()),
                    .window_strides = ToVector(slice.window_strides())};
}

OpAttrs ToStridedSliceAttrs(const v1::StridedSliceAttrs& attrs) {
  return StridedSliceAttrs{.begin = ToVector(attrs.begin()),
                           .end = ToVector(attrs.end()),
                           .stride = ToVector(attrs.stride()),
                           .begin_mask = ToVector(attrs.begin_mask()),
                           .end_mask = ToVector(attrs.end_mask()),
                           .new_axis_mask = ToVector(attrs.new_axis_mask()),
                           .shrink_axis_mask = ToVector(attrs.shrink_axis_mask()),
                           .ellipsis_mask = ToVector(attrs.ellipsis_mask())};
}

}  // namespace

absl::StatusOr<DType> ToDType(int value, absl::string_view field) {
  if (std::optional<DType> dtype = DTypeFromInt(value)) return *dtype;
  if (v1::DType_IsValid(value)) {
    // Only DTYPE_UNSPECIFIED is a named value without a core dtype.
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", value, " (",
                                                   v1::DType_Name(static_cast<v1::DType>(value)),
                                                   ") is not a dtype"));
  }
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", value, " is not a dtype"));
}

v1::DType ToProtoDType(DType dtype) { return static_cast<v1::DType>(dtype); }

absl::string_view OpCaseName(const v1::RunRequest& request) {
  switch (request.op_case()) {
    case v1::RunRequest::kSlice:
      return InfoOf<SliceAttrs>().name;
    case v1::RunRequest::kStridedSlice:
      return InfoOf<StridedSliceAttrs>().name;
    case v1::RunRequest::kSplit:
      return InfoOf<SplitAttrs>().name;
    case v1::RunRequest::kScatterElements:
      return InfoOf<ScatterElementsAttrs>().name;
    case v1::RunRequest::kTranspose:
      return InfoOf<TransposeAttrs>().name;
    case v1::RunRequest::kReshape:
      return InfoOf<ReshapeAttrs>().name;
    case v1::RunRequest::kExpand:
      return InfoOf<ExpandAttrs>().name;
    case v1::RunRequest::kTile:
      return InfoOf<TileAttrs>().name;
    case v1::RunRequest::kGather:
      return InfoOf<GatherAttrs>().name;
    case v1::RunRequest::kGatherElements:
      return InfoOf<GatherElementsAttrs>().name;
    case v1::RunRequest::kJoin:
      return InfoOf<JoinAttrs>().name;
    case v1::RunRequest::kPad:
      return InfoOf<PadAttrs>().name;
    case v1::RunRequest::OP_NOT_SET:
      break;
  }
  return "";
}

absl::string_view ValuesInputOf(const v1::RunRequest& request) {
  const absl::string_view name = OpCaseName(request);
  for (const OperatorInfo& op : kOperators) {
    if (op.name == name) return op.values_input;
  }
  return "";
}

absl::StatusOr<OpAttrs> ToOpAttrs(const v1::RunRequest& request) {
  switch (request.op_case()) {
    case v1::RunRequest::kSlice:
      return ToSliceAttrs(request.slice());
    case v1::RunRequest::kStridedSlice:
      return ToStridedSliceAttrs(request.strided_slice());
    case v1::RunRequest::kSplit:
      return SplitAttrs{.axis = request.split().axis()};
    case v1::RunRequest::kScatterElements:
      return ScatterElementsAttrs{.axis = request.scatter_elements().axis()};
    case v1::RunRequest::kTranspose:
      return TransposeAttrs{.perm = ToVector(request.transpose().perm())};
    case v1::RunRequest::kReshape:
      return ReshapeAttrs{.sizes = ToVector(request.reshape().sizes())};
    case v1::RunRequest::kExpand:
      return ExpandAttrs{.sizes = ToVector(request.expand().sizes())};
    case v1::RunRequest::kTile:
      return TileAttrs{.repeats = ToVector(request.tile().repeats())};
    case v1::RunRequest::kGather:
      return GatherAttrs{.axis = request.gather().axis()};
    case v1::RunRequest::kGatherElements:
      return GatherElementsAttrs{.axis = request.gather_elements().axis()};
    case v1::RunRequest::kJoin:
      return JoinAttrs{.axis = request.join().axis()};
    case v1::RunRequest::kPad:
      return PadAttrs{.start_padding = ToVector(request.pad().start_padding()),
                      .end_padding = ToVector(request.pad().end_padding()),
                      .mode = request.pad().mode(),
                      .value = request.pad().value()};
    case v1::RunRequest::OP_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "op: none of ",
      absl::StrJoin(
          kOperators, ", ",
          [](std::string* out, const OperatorInfo& info) { absl::StrAppend(out, info.name); }),
      " is set"));
}

absl::StatusOr<OpRequest> ToOpRequest(const v1::RunRequest& request) {
  OpRequest op;
  ASSIGN_OR_RETURN(op.attrs, ToOpAttrs(request));

  // The proto map's order is unspecified; name order keeps the error for "the
  // first bad input" the same from call to call.
  std::vector<const google::protobuf::MapPair<std::string, v1::Tensor>*> entries;
  entries.reserve(request.inputs_size());
  for (const auto& entry : request.inputs()) entries.push_back(&entry);
  std::sort(entries.begin(), entries.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });

  op.inputs.reserve(entries.size());
  for (const auto* entry : entries) {
    const std::string& name = entry->first;
    const v1::Tensor& tensor = entry->second;
    // A handle's dtype may be left out: ResolveHandleInputs sets it.
    absl::StatusOr<DType> dtype = tensor.has_handle() && tensor.dtype() == v1::DTYPE_UNSPECIFIED
                                      ? DType::kUint8
                                      : ToDType(tensor.dtype(), absl::StrCat(name, ".dtype"));
    if (!dtype.ok()) return dtype.status();
    const std::string& data = tensor.data();
    op.inputs.push_back(NamedTensor{
        .name = name,
        .tensor = TensorView{.desc = TensorDesc{.dtype = *dtype,
                                                .sizes = ToVector(tensor.sizes()),
                                                .strides = ToVector(tensor.strides())},
                             .data = std::span<const std::byte>(
                                 reinterpret_cast<const std::byte*>(data.data()), data.size())}});
  }

  op.outputs.reserve(request.outputs_size());
  for (const v1::OutputDesc& output : request.outputs()) {
    op.outputs.push_back(
        OutputDesc{.sizes = ToVector(output.sizes()), .strides = ToVector(output.strides())});
  }
  return op;
}

void SetTensorLayout(const Layout& layout, v1::Tensor* tensor) {
  tensor->set_dtype(ToProtoDType(layout.dtype));
  tensor->mutable_sizes()->Assign(layout.sizes.begin(), layout.sizes.end());
  tensor->mutable_strides()->Assign(layout.strides.begin(), layout.strides.end());
}

void ToProtoTensor(const Layout& layout, std::span<const std::byte> bytes, v1::Tensor* tensor) {
  SetTensorLayout(layout, tensor);
  // An empty tensor carries no data field (as before `data` joined a oneof,
  // whose empty value protobuf would now write).
  if (!bytes.empty()) tensor->set_data(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace tensorop::server
