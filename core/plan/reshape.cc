#include "core/plan/reshape.h"

#include <numeric>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/checked_math.h"
#include "core/plan/strided_copy.h"

namespace tensorop {
namespace {

// A layout's dimensions of size > 1, with where each stands in the layout.
struct Dims {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  std::vector<size_t> positions;
};

Dims NonUnitDims(const Layout& layout) {
  Dims dims;
  for (size_t d = 0; d < layout.sizes.size(); ++d) {
    if (layout.sizes[d] == 1) continue;
    dims.sizes.push_back(layout.sizes[d]);
    dims.strides.push_back(layout.strides[d]);
    dims.positions.push_back(d);
  }
  return dims;
}

// A run of input dimensions [in_begin, in_end) and output dimensions
// [out_begin, out_end) holding the same elements: the shortest runs whose
// sizes multiply to the same count.
struct Group {
  size_t in_begin, in_end, out_begin, out_end;
};

std::vector<Group> SharedRuns(const Dims& in, const Dims& out) {
  std::vector<Group> groups;
  size_t i = 0;
  size_t j = 0;
  // Both lists multiply to the same count, and every partial product stays
  // below it, so the two walks end together.
  while (i < in.sizes.size() && j < out.sizes.size()) {
    Group group{i, i, j, j};
    int64_t in_count = in.sizes[i++];
    int64_t out_count = out.sizes[j++];
    while (in_count != out_count) {
      if (in_count < out_count) {
        in_count *= in.sizes[i++];
      } else {
        out_count *= out.sizes[j++];
      }
    }
    group.in_end = i;
    group.out_end = j;
    groups.push_back(group);
  }
  return groups;
}

// Whether dims [begin, end) step through their elements in row-major order
// at the innermost one's stride.
bool SteppedEvenly(const Dims& dims, size_t begin, size_t end) {
  for (size_t k = begin; k + 1 < end; ++k) {
    std::optional<int64_t> span = CheckedMul(dims.strides[k + 1], dims.sizes[k + 1]);
    if (!span || *span != dims.strides[k]) return false;
  }
  return true;
}

// Appends dims [begin, end) of `walked` to `sizes`, with their own strides in
// `own` and, in `other`, the strides of the other side's evenly stepped run
// whose innermost stride is `step`.
void AppendWalk(const Dims& walked, size_t begin, size_t end, int64_t step,
                std::vector<int64_t>& sizes, std::vector<int64_t>& own,
                std::vector<int64_t>& other) {
  std::vector<int64_t> evenly(end - begin);
  int64_t inner = step;
  for (size_t k = end; k-- > begin;) {
    evenly[k - begin] = inner;
    inner *= walked.sizes[k];
  }
  for (size_t k = begin; k < end; ++k) {
    sizes.push_back(walked.sizes[k]);
    own.push_back(walked.strides[k]);
    other.push_back(evenly[k - begin]);
  }
}

// The offset (elements) of linear element `index` of dims [begin, end).
int64_t OffsetOf(const Dims& dims, size_t begin, size_t end, int64_t index) {
  int64_t offset = 0;
  for (size_t k = end; k-- > begin;) {
    offset += (index % dims.sizes[k]) * dims.strides[k];
    index /= dims.sizes[k];
  }
  return offset;
}

// The window an output of `rank` dimensions is on the input, when every shared
// run of the input is stepped evenly.
std::optional<InputWindow> WindowOver(const Dims& in, const Dims& out,
                                      const std::vector<Group>& runs, size_t rank) {
  InputWindow window;
  window.strides.assign(rank, 0);
  for (const Group& group : runs) {
    if (!SteppedEvenly(in, group.in_begin, group.in_end)) return std::nullopt;
    int64_t stride = in.strides[group.in_end - 1];
    for (size_t k = group.out_end; k-- > group.out_begin;) {
      window.strides[out.positions[k]] = stride;
      stride *= out.sizes[k];
    }
  }
  return window;
}

}  // namespace

absl::StatusOr<ExecutionPlan> PlanReshape(const ReshapeGeometry& geometry) {
  const Layout& output = geometry.output;
  const OperatorInfo& op = InfoOf<ReshapeAttrs>();
  const Dims in = NonUnitDims(geometry.input);
  const Dims out = NonUnitDims(output);
  const std::vector<Group> runs = SharedRuns(in, out);
  if (std::optional<InputWindow> window = WindowOver(in, out, runs, output.sizes.size())) {
    return PlanWindowCopy(op, output, *window);
  }
  // The copy walks each shared run on the side that is not stepped evenly:
  // the output's dims when the input is, else the input's dims, each written
  // where its row-major place falls in the output's run. A run neither side
  // steps evenly is walked in stretches both step through evenly, one copy
  // per stretch.
  Layout walk;
  walk.dtype = output.dtype;
  InputWindow read;
  struct Stretches {
    Group group;
    int64_t length;
    int64_t count;
  };
  std::vector<Stretches> tangled;
  int64_t copies = 1;
  for (const Group& group : runs) {
    if (SteppedEvenly(in, group.in_begin, group.in_end)) {
      AppendWalk(out, group.out_begin, group.out_end, in.strides[group.in_end - 1], walk.sizes,
                 walk.strides, read.strides);
    } else if (SteppedEvenly(out, group.out_begin, group.out_end)) {
      AppendWalk(in, group.in_begin, group.in_end, out.strides[group.out_end - 1], walk.sizes,
                 read.strides, walk.strides);
    } else {
      const int64_t length = std::gcd(in.sizes[group.in_end - 1], out.sizes[group.out_end - 1]);
      int64_t elements = 1;
      for (size_t k = group.in_begin; k < group.in_end; ++k) elements *= in.sizes[k];
      tangled.push_back({group, length, elements / length});
      copies *= elements / length;  // <= the element count, < 2^32
      if (copies > kMaxReshapeCopies) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "reshape: the input's strides and outputs[0].strides both break the same run of "
            "dimensions, which takes more than ",
            kMaxReshapeCopies, " copies; ask for a packed output or send a packed input"));
      }
      walk.sizes.push_back(length);
      walk.strides.push_back(out.strides[group.out_end - 1]);
      read.strides.push_back(in.strides[group.in_end - 1]);
    }
  }
  walk.element_count = 1;
  for (int64_t size : walk.sizes) walk.element_count *= size;
  walk.buffer_elements = output.buffer_elements;

  ExecutionPlan plan = EmptyPlan(op);
  plan.outputs = {output};
  const int64_t element_size = ElementSize(output.dtype);
  for (int64_t copy = 0; copy < copies; ++copy) {
    // `copy` in mixed radix over the tangled runs' stretch counts.
    int64_t rest = copy;
    read.base = 0;
    int64_t write_base = 0;
    for (size_t t = tangled.size(); t-- > 0;) {
      const Stretches& run = tangled[t];
      const int64_t first = (rest % run.count) * run.length;
      rest /= run.count;
      read.base += OffsetOf(in, run.group.in_begin, run.group.in_end, first);
      write_base += OffsetOf(out, run.group.out_begin, run.group.out_end, first);
    }
    StridedCopy step = PlanStridedCopy(walk, read, 0, 0);
    step.dst_offset = write_base * element_size;
    plan.copies.push_back(std::move(step));
  }
  return plan;
}

}  // namespace tensorop
