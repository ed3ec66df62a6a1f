// One description per operator: its name, its inputs' names in slot order, how
// many outputs a request lists and the ranks its inputs take. Validation,
// planning, the request binding and the server's conversion read these instead
// of spelling them, so adding an operator means one more row here.
#ifndef TENSOROP_CORE_OPERATOR_INFO_H_
#define TENSOROP_CORE_OPERATOR_INFO_H_

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/attrs.h"

namespace tensorop {

// Which ranks and sizes an operator accepts for its input tensors.
struct RankRule {
  int min_rank;
  int max_rank;
  bool allow_zero_sizes;
  absl::string_view op;  // for messages: "slice takes rank 1..8"
};

// The request's `outputs` list, per operator.
enum class OutputRule {
  kOneGiven,        // exactly one entry; the caller gives its sizes (slice)
  kOneDerived,      // none or one; the operator derives the sizes
  kOneOrMoreGiven,  // at least one; the caller gives each one's sizes (split)
};

struct OperatorInfo {
  // OPERATORS.md's name: the conformance cases' "op", messages, logs, metrics.
  absl::string_view name;
  // Slot order: the plan's input slot i binds the input named input_names[i].
  // Empty for an operator of numbered inputs.
  std::span<const absl::string_view> input_names;
  OutputRule outputs;
  RankRule input_rank;  // every input
  // The attributes a request may leave out (empty or 0), each with the default
  // OPERATORS.md gives it; every other attribute must be given (v2's models
  // mark them required).
  std::span<const absl::string_view> optional_attrs;
  // The input whose element values planning reads (indices, each checked in
  // range), so a server holds its bytes on the host before planning; empty
  // when the plan follows from the inputs' layouts alone.
  absl::string_view values_input = {};
  // Takes any number of inputs, 1..kMaxNumberedInputs, named inputs_0,
  // inputs_1, ... (NumberedInputName) without gaps, bound in that order (join).
  bool numbered_inputs = false;
};

inline constexpr size_t kMaxOperatorInputs = 3;  // of named inputs
// More is RESOURCE_EXHAUSTED: each input is a copy of its own to schedule.
inline constexpr size_t kMaxNumberedInputs = 4096;

// "inputs_<k>" for k < kMaxNumberedInputs, in storage that lives as long as the
// process (plans keep their input names as views).
absl::string_view NumberedInputName(size_t k);
// k of "inputs_<k>", written in decimal without leading zeros (any k below
// 10^9); nullopt for any other name.
std::optional<size_t> NumberedInputIndex(absl::string_view name);

namespace operator_info_internal {

inline constexpr absl::string_view kInput[] = {"input"};
inline constexpr absl::string_view kScatterInputs[] = {"input", "indices", "updates"};
inline constexpr absl::string_view kGatherInputs[] = {"input", "indices"};
inline constexpr absl::string_view kTransposeDefaults[] = {"perm"};
inline constexpr absl::string_view kPadDefaults[] = {"mode", "value"};
inline constexpr absl::string_view kStridedSliceDefaults[] = {
    "stride", "begin_mask", "end_mask", "new_axis_mask", "shrink_axis_mask", "ellipsis_mask"};

constexpr OperatorInfo Describe(absl::string_view name, std::span<const absl::string_view> inputs,
                                OutputRule outputs, int max_rank, bool allow_zero_sizes,
                                std::span<const absl::string_view> optional_attrs = {},
                                absl::string_view values_input = {}) {
  return {name,           inputs,      outputs, RankRule{1, max_rank, allow_zero_sizes, name},
          optional_attrs, values_input};
}

// The position of T among the alternatives of OpAttrs.
template <typename T, typename... Ts>
constexpr size_t IndexIn(const std::variant<Ts...>*) {
  size_t index = 0;
  (void)((std::is_same_v<T, Ts> ? false : (++index, true)) && ...);
  return index;
}

}  // namespace operator_info_internal

// Indexed like OpAttrs: kOperators[attrs.index()] describes `attrs`' operator.
// DirectML's operators take ranks 1..8 with no zero sizes; OpenVINO's
// StridedSlice takes up to 32 and empty dimensions (OPERATORS.md).
inline constexpr std::array<OperatorInfo, std::variant_size_v<OpAttrs>> kOperators = {{
    operator_info_internal::Describe("slice", operator_info_internal::kInput, OutputRule::kOneGiven,
                                     8, false),
    operator_info_internal::Describe("strided_slice", operator_info_internal::kInput,
                                     OutputRule::kOneDerived, 32, true,
                                     operator_info_internal::kStridedSliceDefaults),
    operator_info_internal::Describe("split", operator_info_internal::kInput,
                                     OutputRule::kOneOrMoreGiven, 8, false),
    operator_info_internal::Describe("scatter_elements", operator_info_internal::kScatterInputs,
                                     OutputRule::kOneDerived, 8, false, {}, "indices"),
    operator_info_internal::Describe("transpose", operator_info_internal::kInput,
                                     OutputRule::kOneDerived, 8, false,
                                     operator_info_internal::kTransposeDefaults),
    operator_info_internal::Describe("reshape", operator_info_internal::kInput,
                                     OutputRule::kOneDerived, 8, false),
    operator_info_internal::Describe("expand", operator_info_internal::kInput,
                                     OutputRule::kOneDerived, 8, false),
    operator_info_internal::Describe("tile", operator_info_internal::kInput,
                                     OutputRule::kOneDerived, 8, false),
    operator_info_internal::Describe("gather", operator_info_internal::kGatherInputs,
                                     OutputRule::kOneDerived, 8, false, {}, "indices"),
    operator_info_internal::Describe("gather_elements", operator_info_internal::kGatherInputs,
                                     OutputRule::kOneDerived, 8, false, {}, "indices"),
    [] {
      OperatorInfo join =
          operator_info_internal::Describe("join", {}, OutputRule::kOneDerived, 8, false);
      join.numbered_inputs = true;
      return join;
    }(),
    operator_info_internal::Describe("pad", operator_info_internal::kInput, OutputRule::kOneDerived,
                                     8, false, operator_info_internal::kPadDefaults),
}};
static_assert(
    [] {
      for (const OperatorInfo& op : kOperators) {
        if (op.input_names.size() > kMaxOperatorInputs) return false;
      }
      return true;
    }(),
    "raise kMaxOperatorInputs");

// The description of the operator whose attributes are `Attrs` (SliceAttrs, ...).
template <typename Attrs>
constexpr const OperatorInfo& InfoOf() {
  constexpr size_t index =
      operator_info_internal::IndexIn<Attrs>(static_cast<const OpAttrs*>(nullptr));
  static_assert(index < kOperators.size(), "not an alternative of OpAttrs");
  return kOperators[index];
}

inline const OperatorInfo& InfoOf(const OpAttrs& attrs) { return kOperators[attrs.index()]; }

// Output j's name in messages: "outputs[0]", ...
inline std::string OutputName(size_t j) { return absl::StrCat("outputs[", j, "]"); }

}  // namespace tensorop

#endif  // TENSOROP_CORE_OPERATOR_INFO_H_
