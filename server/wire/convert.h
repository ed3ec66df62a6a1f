// Conversions between the public proto messages and core's plain structs.
// Requests are converted without copying tensor bytes: the views point into the
// proto, which must outlive them.
#ifndef TENSOROP_SERVER_WIRE_CONVERT_H_
#define TENSOROP_SERVER_WIRE_CONVERT_H_

#include <cstddef>
#include <span>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/dtype.h"
#include "core/operator.h"
#include "core/tensor.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

// The core dtype for a wire value. `field` names it in the error, e.g.
// "indices.dtype: 0 (DTYPE_UNSPECIFIED) is not a dtype" or
// "input.dtype: 42 is not a dtype" (proto3 enums are open).
absl::StatusOr<DType> ToDType(int value, absl::string_view field);

// The wire value for a core dtype (the numbering is shared).
v1::DType ToProtoDType(DType dtype);

// The op's name as in OPERATORS.md ("slice", ...), or "" when none is set.
absl::string_view OpCaseName(const v1::RunRequest& request);

// The input whose values planning `request`'s operator reads (its row's
// values_input: "indices" of scatter_elements, gather, gather_elements), or ""
// when its plan follows from the inputs' layouts alone (or no op is set).
absl::string_view ValuesInputOf(const v1::RunRequest& request);

// `request`'s operator and attributes as core's; INVALID_ARGUMENT when it sets
// none.
absl::StatusOr<OpAttrs> ToOpAttrs(const v1::RunRequest& request);

// `request` as a core OpRequest. Every TensorView's data spans the bytes of the
// corresponding `request.inputs()` entry, so `request` must stay alive and
// unchanged while the result is used. Only wire-level problems are reported
// here (no op set, a dtype that is no dtype); the operator rules are core's.
absl::StatusOr<OpRequest> ToOpRequest(const v1::RunRequest& request);

// Fills `tensor`'s dtype, sizes and (always explicit) strides from `layout`;
// leaves its data alone.
void SetTensorLayout(const Layout& layout, v1::Tensor* tensor);

// `layout` and its `bytes` (layout.buffer_bytes() of them) as a proto Tensor.
void ToProtoTensor(const Layout& layout, std::span<const std::byte> bytes, v1::Tensor* tensor);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_WIRE_CONVERT_H_
