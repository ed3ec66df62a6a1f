// The dtypes (core/dtype.h): sizes, names and wire numbers, bfloat16 and bool
// among them.
#include "core/dtype.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tensorop {
namespace {

TEST(DTypeTest, SizesNamesAndWireNumbers) {
  EXPECT_EQ(ElementSize(DType::kBfloat16), 2);
  EXPECT_EQ(ElementSize(DType::kBool), 1);
  EXPECT_EQ(ElementSize(DType::kFloat64), 8);
  EXPECT_EQ(DTypeName(DType::kBfloat16), "bfloat16");
  EXPECT_EQ(DTypeName(DType::kBool), "bool");
  EXPECT_EQ(DTypeFromInt(12), DType::kBfloat16);
  EXPECT_EQ(DTypeFromInt(13), DType::kBool);
  EXPECT_EQ(DTypeFromInt(0), std::nullopt);
  EXPECT_EQ(DTypeFromInt(14), std::nullopt);
  EXPECT_TRUE(IsFloat(DType::kBfloat16));
  EXPECT_TRUE(IsSigned(DType::kBfloat16));
  EXPECT_FALSE(IsFloat(DType::kBool));
  EXPECT_FALSE(IsSigned(DType::kBool));
}

TEST(DTypeTest, EveryDtypeHasItsOwnNameAndNumberAndReadsBack) {
  std::set<std::string> names;
  for (DType dtype : kAllDTypes) {
    const std::string name(DTypeName(dtype));
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_EQ(DTypeFromName(name), dtype) << name;
    EXPECT_EQ(DTypeFromInt(static_cast<int64_t>(dtype)), dtype) << name;
    EXPECT_THAT(ElementSize(dtype), ::testing::AnyOf(1, 2, 4, 8)) << name;
  }
  EXPECT_EQ(names.size(), 13u);
}

// The kernel matrices run one dtype per size: each size once.
TEST(DTypeTest, OneDtypePerSizeCoversEverySize) {
  std::set<int> sizes;
  for (DType dtype : kOneDTypePerSize) sizes.insert(ElementSize(dtype));
  EXPECT_THAT(sizes, ::testing::ElementsAre(1, 2, 4, 8));
}

}  // namespace
}  // namespace tensorop
