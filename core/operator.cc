#include "core/operator.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <span>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/checked_math.h"
#include "core/operator_info.h"
#include "core/plan/expand.h"
#include "core/plan/gather.h"
#include "core/plan/gather_elements.h"
#include "core/plan/join.h"
#include "core/plan/pad.h"
#include "core/plan/reshape.h"
#include "core/plan/scatter_elements.h"
#include "core/plan/slice.h"
#include "core/plan/split.h"
#include "core/plan/strided_slice.h"
#include "core/plan/tile.h"
#include "core/plan/transpose.h"
#include "core/status_macros.h"
#include "core/validate/tensor.h"

namespace tensorop {
namespace {

// Finds each of `op`'s inputs once, in slot order; unknown or repeated names
// are errors.
absl::StatusOr<std::array<const TensorView*, kMaxOperatorInputs>> BindInputs(
    const OperatorInfo& op, const std::vector<NamedTensor>& inputs) {
  const std::span<const absl::string_view> names = op.input_names;
  std::array<const TensorView*, kMaxOperatorInputs> bound{};
  const auto quoted = [&] {
    return absl::StrJoin(names, ", ", [](std::string* out, absl::string_view name) {
      absl::StrAppend(out, "\"", name, "\"");
    });
  };
  for (const NamedTensor& input : inputs) {
    auto at = std::find(names.begin(), names.end(), input.name);
    if (at == names.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("inputs has \"", input.name, "\"; ", op.name, " takes ", quoted()));
    }
    const TensorView*& slot = bound[at - names.begin()];
    if (slot != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("inputs has \"", input.name, "\" more than once"));
    }
    slot = &input.tensor;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (bound[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("inputs is missing \"", names[i], "\"; ", op.name, " takes ", quoted()));
    }
  }
  return bound;
}

// Binds the numbered inputs (NamedTensor or NamedDesc) of `op` in their order:
// inputs_0 .. inputs_{n-1}, each once, without gaps.
template <typename Named>
absl::StatusOr<std::vector<const Named*>> BindNumberedInputs(const OperatorInfo& op,
                                                             const std::vector<Named>& inputs) {
  if (inputs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs is empty; ", op.name, " takes one or more, \"inputs_0\" first"));
  }
  if (inputs.size() > kMaxNumberedInputs) {
    return absl::ResourceExhaustedError(absl::StrCat("inputs has ", inputs.size(), " entries; ",
                                                     op.name, " takes at most ",
                                                     kMaxNumberedInputs));
  }
  std::vector<const Named*> bound(inputs.size(), nullptr);
  const Named* past_end = nullptr;  // a number >= the count: some number is missing
  for (const Named& input : inputs) {
    const std::optional<size_t> k = NumberedInputIndex(input.name);
    if (!k.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("inputs has \"", input.name, "\"; ", op.name,
                                                     " takes \"inputs_0\", \"inputs_1\", ... "
                                                     "(numbered from 0 in decimal)"));
    }
    if (*k >= bound.size()) {
      if (past_end == nullptr) past_end = &input;
      continue;
    }
    if (bound[*k] != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("inputs has \"", input.name, "\" more than once"));
    }
    bound[*k] = &input;
  }
  if (past_end != nullptr) {
    const size_t missing =
        static_cast<size_t>(std::find(bound.begin(), bound.end(), nullptr) - bound.begin());
    return absl::InvalidArgumentError(
        absl::StrCat("inputs has \"", past_end->name, "\" but not \"", NumberedInputName(missing),
                     "\"; ", op.name, "'s inputs are numbered from \"inputs_0\" without gaps"));
  }
  return bound;
}

struct Planner {
  const OpRequest& request;
  const Limits& limits;
  const StopCheck& stop;

  absl::StatusOr<ExecutionPlan> operator()(const SliceAttrs& attrs) const {
    ASSIGN_OR_RETURN(auto inputs, BindInputs(InfoOf<SliceAttrs>(), request.inputs));
    ASSIGN_OR_RETURN(SliceGeometry geometry,
                     ValidateSlice(attrs, *inputs[0], request.outputs, limits));
    return PlanSlice(geometry);
  }
  absl::StatusOr<ExecutionPlan> operator()(const StridedSliceAttrs& attrs) const {
    ASSIGN_OR_RETURN(auto inputs, BindInputs(InfoOf<StridedSliceAttrs>(), request.inputs));
    ASSIGN_OR_RETURN(StridedSliceGeometry geometry,
                     ValidateStridedSlice(attrs, *inputs[0], request.outputs, limits));
    return PlanStridedSlice(geometry);
  }
  absl::StatusOr<ExecutionPlan> operator()(const SplitAttrs& attrs) const {
    ASSIGN_OR_RETURN(auto inputs, BindInputs(InfoOf<SplitAttrs>(), request.inputs));
    ASSIGN_OR_RETURN(SplitGeometry geometry,
                     ValidateSplit(attrs, *inputs[0], request.outputs, limits, stop));
    return PlanSplit(geometry);
  }
  absl::StatusOr<ExecutionPlan> operator()(const ScatterElementsAttrs& attrs) const {
    ASSIGN_OR_RETURN(auto inputs, BindInputs(InfoOf<ScatterElementsAttrs>(), request.inputs));
    ASSIGN_OR_RETURN(ScatterElementsGeometry geometry,
                     ValidateScatterElements(attrs, *inputs[0], *inputs[1], *inputs[2],
                                             request.outputs, limits, stop));
    return PlanScatterElements(geometry);
  }
  absl::StatusOr<ExecutionPlan> operator()(const TransposeAttrs& attrs) const {
    ASSIGN_OR_RETURN(auto inputs, BindInputs(InfoOf<TransposeAttrs>(), request.inputs));
    ASSIGN_OR_RETURN(TransposeGeometry geometry,
                     ValidateTranspose(attrs, *inputs[0], request.outputs, limits));
    return PlanTranspose(geometry);
  }
  absl::StatusOr<ExecutionPlan> operator()(const ReshapeAttrs& attrs) const {
    ASSIGN_OR_RETURN(auto inputs, BindInputs(InfoOf<ReshapeAttrs>(), request.inputs));
    ASSIGN_OR_RETURN(ReshapeGeometry geometry,
                     ValidateReshape(attrs, *inputs[0], request.outputs, limits));
    return PlanReshape(geometry);
  }
  absl::StatusOr<ExecutionPlan> operator()(const ExpandAttrs& attrs) const {
    ASSIGN_OR_RETURN(auto inputs, BindInputs(InfoOf<ExpandAttrs>(), request.inputs));
    ASSIGN_OR_RETURN(ExpandGeometry geometry,
                     ValidateExpand(attrs, *inputs[0], request.outputs, limits));
    return PlanExpand(geometry);
  }
  absl::StatusOr<ExecutionPlan> operator()(const PadAttrs& attrs) const {
    ASSIGN_OR_RETURN(auto inputs, BindInputs(InfoOf<PadAttrs>(), request.inputs));
    ASSIGN_OR_RETURN(PadGeometry geometry, ValidatePad(attrs, *inputs[0], request.outputs, limits));
    return PlanPad(geometry);
  }
  absl::StatusOr<ExecutionPlan> operator()(const TileAttrs& attrs) const {
    ASSIGN_OR_RETURN(auto inputs, BindInputs(InfoOf<TileAttrs>(), request.inputs));
    ASSIGN_OR_RETURN(TileGeometry geometry,
                     ValidateTile(attrs, *inputs[0], request.outputs, limits));
    return PlanTile(geometry);
  }
  absl::StatusOr<ExecutionPlan> operator()(const GatherAttrs& attrs) const {
    ASSIGN_OR_RETURN(auto inputs, BindInputs(InfoOf<GatherAttrs>(), request.inputs));
    ASSIGN_OR_RETURN(GatherGeometry geometry,
                     ValidateGather(attrs, *inputs[0], *inputs[1], request.outputs, limits, stop));
    return PlanGather(geometry);
  }
  absl::StatusOr<ExecutionPlan> operator()(const GatherElementsAttrs& attrs) const {
    ASSIGN_OR_RETURN(auto inputs, BindInputs(InfoOf<GatherElementsAttrs>(), request.inputs));
    ASSIGN_OR_RETURN(
        GatherElementsGeometry geometry,
        ValidateGatherElements(attrs, *inputs[0], *inputs[1], request.outputs, limits, stop));
    return PlanGatherElements(geometry);
  }
  absl::StatusOr<ExecutionPlan> operator()(const JoinAttrs& attrs) const {
    ASSIGN_OR_RETURN(std::vector<const NamedTensor*> bound,
                     BindNumberedInputs(InfoOf<JoinAttrs>(), request.inputs));
    std::vector<const TensorView*> inputs;
    for (const NamedTensor* input : bound) inputs.push_back(&input->tensor);
    ASSIGN_OR_RETURN(JoinGeometry geometry, ValidateJoin(attrs, inputs, request.outputs, limits));
    return PlanJoin(geometry);
  }
};

// Inputs as received plus every output buffer the plan asks for.
absl::Status CheckRequestBytes(const OpRequest& request, const ExecutionPlan& plan,
                               const Limits& limits) {
  int64_t input_bytes = 0;
  for (const NamedTensor& input : request.inputs) {
    input_bytes += static_cast<int64_t>(input.tensor.data.size());
  }
  int64_t output_bytes = 0;
  for (const Layout& output : plan.outputs) {
    std::optional<int64_t> sum = CheckedAdd(output_bytes, output.buffer_bytes());
    if (!sum) {
      return absl::ResourceExhaustedError("the outputs need more than 2^63 bytes");
    }
    output_bytes = *sum;
  }
  std::optional<int64_t> total = CheckedAdd(input_bytes, output_bytes);
  if (!total || *total > limits.max_request_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the request needs ", input_bytes, " bytes of inputs and ", output_bytes,
                     " bytes of outputs; the limit is ", limits.max_request_bytes, " in all"));
  }
  return absl::OkStatus();
}

// OutputSizes, per operator.
struct OutputSizer {
  const TensorDesc& input;    // empty for an operator of numbered inputs
  const TensorDesc* indices;  // null: not given
  std::span<const TensorDesc* const> numbered;
  std::span<const int64_t> split_sizes;

  using Sizes = std::vector<std::vector<int64_t>>;

  absl::StatusOr<Sizes> operator()(const SliceAttrs& attrs) const {
    // The whole window: every element its stride reaches.
    std::vector<int64_t> sizes;
    for (size_t i = 0; i < attrs.window_sizes.size(); ++i) {
      const int64_t size = attrs.window_sizes[i];
      const int64_t stride = i < attrs.window_strides.size() ? attrs.window_strides[i] : 1;
      const bool valid = size >= 1 && stride != 0 && stride != std::numeric_limits<int64_t>::min();
      sizes.push_back(valid ? 1 + (size - 1) / (stride < 0 ? -stride : stride) : size);
    }
    return Sizes{sizes};
  }
  absl::StatusOr<Sizes> operator()(const StridedSliceAttrs& attrs) const {
    // The rules read the input's sizes only: it is described over one element,
    // broadcast (stride 0).
    static constexpr std::byte kElement[8] = {};
    TensorView view;
    view.desc.dtype = input.dtype;
    view.desc.sizes = input.sizes;
    view.desc.strides.assign(input.sizes.size(), 0);
    view.data = std::span<const std::byte>(kElement, static_cast<size_t>(ElementSize(input.dtype)));
    ASSIGN_OR_RETURN(StridedSliceGeometry geometry,
                     ValidateStridedSlice(attrs, view, {}, Limits{}));
    return Sizes{geometry.output.sizes};
  }
  absl::StatusOr<Sizes> operator()(const SplitAttrs& attrs) const {
    const int64_t rank = static_cast<int64_t>(input.sizes.size());
    const int64_t axis = attrs.axis < 0 ? attrs.axis + rank : attrs.axis;
    Sizes outputs(split_sizes.size(), input.sizes);
    for (size_t k = 0; k < outputs.size() && axis >= 0 && axis < rank; ++k) {
      outputs[k][static_cast<size_t>(axis)] = split_sizes[k];
    }
    return outputs;
  }
  absl::StatusOr<Sizes> operator()(const ScatterElementsAttrs&) const { return Sizes{input.sizes}; }
  absl::StatusOr<Sizes> operator()(const TransposeAttrs& attrs) const {
    ASSIGN_OR_RETURN(std::vector<int64_t> perm,
                     TransposePermutation(attrs, static_cast<int64_t>(input.sizes.size())));
    std::vector<int64_t> sizes;
    for (int64_t axis : perm) sizes.push_back(input.sizes[static_cast<size_t>(axis)]);
    return Sizes{sizes};
  }
  absl::StatusOr<Sizes> operator()(const ReshapeAttrs& attrs) const {
    ASSIGN_OR_RETURN(int64_t count, CheckedElementCount(input.sizes, "input", Limits{}));
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ReshapedSizes(attrs, count));
    return Sizes{sizes};
  }
  absl::StatusOr<Sizes> operator()(const ExpandAttrs& attrs) const {
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ExpandedSizes(attrs, input.sizes));
    return Sizes{sizes};
  }
  absl::StatusOr<Sizes> operator()(const PadAttrs& attrs) const {
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, PaddedSizes(attrs, input.sizes));
    return Sizes{sizes};
  }
  absl::StatusOr<Sizes> operator()(const TileAttrs& attrs) const {
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, TiledSizes(attrs, input.sizes));
    return Sizes{sizes};
  }
  absl::StatusOr<Sizes> operator()(const GatherAttrs& attrs) const {
    RETURN_IF_ERROR(NeedIndices(InfoOf<GatherAttrs>()));
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, GatheredSizes(attrs, input.sizes, indices->sizes));
    return Sizes{sizes};
  }
  absl::StatusOr<Sizes> operator()(const GatherElementsAttrs&) const {
    RETURN_IF_ERROR(NeedIndices(InfoOf<GatherElementsAttrs>()));
    return Sizes{indices->sizes};
  }
  absl::StatusOr<Sizes> operator()(const JoinAttrs& attrs) const {
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, JoinedSizes(attrs, numbered));
    return Sizes{sizes};
  }

  absl::Status NeedIndices(const OperatorInfo& op) const {
    if (indices != nullptr) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(op.name, "'s output sizes follow from input \"indices\", which is missing"));
  }
};

}  // namespace

absl::StatusOr<std::vector<std::vector<int64_t>>> OutputSizes(
    const OpAttrs& attrs, const std::vector<NamedDesc>& inputs,
    std::span<const int64_t> split_sizes) {
  const OperatorInfo& op = InfoOf(attrs);
  const auto find = [&](absl::string_view name) -> const TensorDesc* {
    for (const NamedDesc& input : inputs) {
      if (input.name == name) return &input.desc;
    }
    return nullptr;
  };
  std::vector<const TensorDesc*> numbered;
  static const TensorDesc kNone;
  const TensorDesc* input = &kNone;
  if (op.numbered_inputs) {
    ASSIGN_OR_RETURN(std::vector<const NamedDesc*> bound, BindNumberedInputs(op, inputs));
    for (const NamedDesc* named : bound) numbered.push_back(&named->desc);
  } else if (input = find("input"); input == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op.name, "'s output sizes follow from input \"input\", which is missing"));
  }
  return std::visit(OutputSizer{*input, find("indices"), numbered, split_sizes}, attrs);
}

absl::string_view OpName(const OpAttrs& attrs) { return InfoOf(attrs).name; }

absl::StatusOr<ExecutionPlan> PlanOperator(const OpRequest& request, const Limits& limits,
                                           const StopCheck& stop) {
  ASSIGN_OR_RETURN(ExecutionPlan plan, std::visit(Planner{request, limits, stop}, request.attrs));
  RETURN_IF_ERROR(stop());
  RETURN_IF_ERROR(CheckRequestBytes(request, plan, limits));
  for (const Layout& output : plan.outputs) plan.bytes_moved += output.buffer_bytes();
  return plan;
}

}  // namespace tensorop
