// The kernel test matrix: every dtype × every input layout × every backend,
// ranks looped inside each test. Shared by the per-operator kernel tests.
#ifndef TENSOROP_TESTS_CORE_KERNELS_MATRIX_H_
#define TENSOROP_TESTS_CORE_KERNELS_MATRIX_H_

#include <random>
#include <string>
#include <tuple>

#include "core/dtype.h"
#include "gtest/gtest.h"
#include "tests/core/kernels/reference.h"

namespace tensorop::testing {

using MatrixParam = std::tuple<DType, LayoutKind, Backend>;

class KernelMatrixTest : public ::testing::TestWithParam<MatrixParam> {
 protected:
  DType dtype() const { return std::get<0>(GetParam()); }
  LayoutKind layout() const { return std::get<1>(GetParam()); }
  Backend backend() const { return std::get<2>(GetParam()); }
  absl::StatusOr<std::vector<OwnedOutput>> Run(const OpRequest& request) const {
    return RunOn(backend(), request);
  }
  // Seeded by the parameters, so a failure reproduces.
  std::mt19937_64 Rng() const {
    return std::mt19937_64(static_cast<uint64_t>(dtype()) * 131 + static_cast<uint64_t>(layout()));
  }
  // Random output strides: packed, padded or permuted, never broadcast.
  std::vector<int64_t> OutputStrides(std::span<const int64_t> sizes, int trial,
                                     std::mt19937_64& rng) const {
    static constexpr LayoutKind kOutputLayouts[] = {LayoutKind::kPacked, LayoutKind::kPadded,
                                                    LayoutKind::kPermuted};
    return MakeStrides(sizes, kOutputLayouts[trial % 3], rng);
  }
};

// For the tests outside the matrix that still run on every backend.
class BackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  absl::StatusOr<std::vector<OwnedOutput>> Run(const OpRequest& request) const {
    return RunOn(GetParam(), request);
  }
};

inline std::string BackendParamName(const ::testing::TestParamInfo<Backend>& info) {
  return BackendName(info.param);
}

#define INSTANTIATE_BACKENDS(suite)                                                \
  INSTANTIATE_TEST_SUITE_P(Backends, suite,                                        \
                           ::testing::ValuesIn(::tensorop::testing::kAllBackends), \
                           ::tensorop::testing::BackendParamName)

inline std::string MatrixName(const ::testing::TestParamInfo<MatrixParam>& info) {
  return std::string(DTypeName(std::get<0>(info.param))) + "_" +
         LayoutName(std::get<1>(info.param)) + "_" + BackendName(std::get<2>(info.param));
}

#define INSTANTIATE_KERNEL_MATRIX(suite)                                          \
  INSTANTIATE_TEST_SUITE_P(                                                       \
      DtypesLayouts, suite,                                                       \
      ::testing::Combine(::testing::ValuesIn(::tensorop::kOneDTypePerSize),       \
                         ::testing::ValuesIn(::tensorop::testing::kAllLayouts),   \
                         ::testing::ValuesIn(::tensorop::testing::kAllBackends)), \
      ::tensorop::testing::MatrixName)

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_CORE_KERNELS_MATRIX_H_
