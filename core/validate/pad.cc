#include "core/validate/pad.h"

#include <algorithm>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/checked_math.h"
#include "core/element_text.h"
#include "core/operator_info.h"
#include "core/status_macros.h"
#include "core/validate/tensor.h"

namespace tensorop {
namespace {

absl::StatusOr<PadMode> ModeOf(const std::string& mode) {
  if (mode.empty() || mode == "constant") return PadMode::kConstant;
  if (mode == "edge") return PadMode::kEdge;
  if (mode == "reflect") return PadMode::kReflect;
  if (mode == "symmetric") return PadMode::kSymmetric;
  return absl::InvalidArgumentError(absl::StrCat(
      "pad.mode is \"", absl::CHexEscape(mode.substr(0, 40)), mode.size() > 40 ? "..." : "",
      "\"; pad's modes are constant, edge, reflect and symmetric (lower case)"));
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> PaddedSizes(const PadAttrs& attrs,
                                                 std::span<const int64_t> input_sizes) {
  const size_t rank = input_sizes.size();
  for (const auto& [name, counts] :
       {std::pair{"start_padding", &attrs.start_padding}, {"end_padding", &attrs.end_padding}}) {
    if (counts->size() != rank) {
      return absl::InvalidArgumentError(absl::StrCat("pad.", name, " has ", counts->size(),
                                                     " entries; the input has rank ", rank,
                                                     " and takes one count per dimension"));
    }
    for (size_t i = 0; i < rank; ++i) {
      if ((*counts)[i] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("pad.", name, "[", i, "] must be >= 0, got ", (*counts)[i],
                         " (a negative count, which crops in ONNX, is not padding)"));
      }
    }
  }
  ASSIGN_OR_RETURN(const PadMode mode, ModeOf(attrs.mode));
  std::vector<int64_t> sizes(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t start = attrs.start_padding[i];
    const int64_t end = attrs.end_padding[i];
    if (mode == PadMode::kReflect && input_sizes[i] < 2 && (start > 0 || end > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pad.mode is reflect and dimension ", i, " is padded (start_padding[", i, "] = ", start,
          ", end_padding[", i, "] = ", end, ") but input.sizes[", i, "] = ", input_sizes[i],
          ": one element has no mirror image (reflect needs two)"));
    }
    const std::optional<int64_t> padding = CheckedAdd(start, end);
    const std::optional<int64_t> size =
        padding ? CheckedAdd(input_sizes[i], *padding) : std::nullopt;
    if (!size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input.sizes[", i, "] = ", input_sizes[i], " plus pad.start_padding[", i, "] = ", start,
          " and pad.end_padding[", i, "] = ", end, " does not fit 64 bits"));
    }
    sizes[i] = *size;
  }
  return sizes;
}

std::vector<PadRun> DimensionRuns(PadMode mode, int64_t size, int64_t start, int64_t end) {
  if (start == 0 && end == 0) return {PadRun{.length = size}};
  if (mode == PadMode::kEdge) {
    std::vector<PadRun> runs;
    if (start > 0) runs.push_back({.out_begin = 0, .length = start, .in_begin = 0, .in_step = 0});
    runs.push_back({.out_begin = start, .length = size});
    if (end > 0) {
      runs.push_back(
          {.out_begin = start + size, .length = end, .in_begin = size - 1, .in_step = 0});
    }
    return runs;
  }
  // Reflect and symmetric repeat every `period` positions: forward over the
  // input, then mirrored (reflect without the edge elements, symmetric with).
  const bool reflect = mode == PadMode::kReflect;
  const int64_t period = reflect ? 2 * size - 2 : 2 * size;
  const int64_t total = size + start + end;
  std::vector<PadRun> runs;
  const auto walk = [&](int64_t from, int64_t count, int64_t repeats) {
    for (int64_t position = from; position < from + count;) {
      const int64_t m = ((position - start) % period + period) % period;
      PadRun run{.out_begin = position, .repeats = repeats, .period = repeats > 1 ? period : 0};
      // Reflect's last element starts the mirrored run (it is read once, and
      // the run is the longer for it); symmetric's ends the forward one.
      if (m < (reflect ? size - 1 : size)) {
        run.in_begin = m;
        run.length = size - m;
      } else {
        run.in_begin = reflect ? period - m : period - 1 - m;
        run.in_step = -1;
        run.length = period - m;
      }
      run.length = std::min(run.length, from + count - position);
      runs.push_back(run);
      position += run.length;
    }
  };
  // Whole periods once, as runs that repeat; the rest after them.
  const int64_t periods = total / period;
  if (periods <= 1) {
    walk(0, total, 1);
  } else {
    walk(0, period, periods);
    walk(periods * period, total - periods * period, 1);
  }
  return runs;
}

absl::StatusOr<PadGeometry> ValidatePad(const PadAttrs& attrs, const TensorView& input,
                                        std::span<const OutputDesc> outputs, const Limits& limits) {
  const OperatorInfo& op = InfoOf<PadAttrs>();
  PadGeometry geometry;
  ASSIGN_OR_RETURN(geometry.input, ValidateInput(input, op.input_names[0], op.input_rank, limits));
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes, PaddedSizes(attrs, geometry.input.sizes));
  ASSIGN_OR_RETURN(geometry.mode, ModeOf(attrs.mode));
  if (geometry.mode == PadMode::kConstant && !attrs.value.empty()) {
    ASSIGN_OR_RETURN(geometry.value_bits,
                     ElementBitsFromText(geometry.input.dtype, attrs.value, "pad.value"));
  }
  // The element count (2^32 - 1 at most) is checked here, before anything
  // sized by it exists.
  ASSIGN_OR_RETURN(geometry.output,
                   ValidateDerivedOutput(op, geometry.input.dtype, sizes, outputs, limits));
  geometry.start_padding = attrs.start_padding;
  if (geometry.mode == PadMode::kConstant) return geometry;
  int64_t copies = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    geometry.runs.push_back(DimensionRuns(geometry.mode, geometry.input.sizes[i],
                                          attrs.start_padding[i], attrs.end_padding[i]));
    copies *= static_cast<int64_t>(geometry.runs.back().size());  // at most 6^8
  }
  if (copies > kMaxPadCopies) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "pad in ", attrs.mode, " mode takes ", copies,
        " copies here (the product of each dimension's runs, more where padding is wider "
        "than the input); one plan holds at most ",
        kMaxPadCopies));
  }
  return geometry;
}

}  // namespace tensorop
