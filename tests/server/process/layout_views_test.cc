// Transpose, reshape and expand of a kept input, kept without strides, are
// views of its bytes (no copy), counted per operator; a reshape its input's
// strides do not allow is one copy. Run in this process (InProcessServer), so
// the handle store's counters are read directly.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/data/handle_store.h"
#include "tensorop/v1/tensorop.grpc.pb.h"
#include "tests/integration/tensord_client.h"
#include "tests/server/process/in_process_server.h"
#include "tests/support/grpc_matchers.h"

namespace tensorop::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<float> OneToSixteenFloats() {
  std::vector<float> values(16);
  for (int i = 0; i < 16; ++i) values[i] = static_cast<float>(i + 1);
  return values;
}

class LayoutViewsTest : public ::testing::Test {
 protected:
  LayoutViewsTest() : stub_(v1::TensorOp::NewStub(Connect(server_.target()))) {
    // [1, 1, 4, 4] of 1..16.
    EXPECT_THAT(PutTensor(*stub_, MakeTensor(v1::FLOAT32, {1, 1, 4, 4}, Pack(OneToSixteenFloats())),
                          &input_, 0, int64_t{1} << 20, v1::CPU),
                GrpcOk());
  }
  ~LayoutViewsTest() override { ReleaseEveryHandle(*stub_); }

  // `request` (its operator set) on handle `id`, its one output kept.
  v1::Tensor Keep(v1::RunRequest request, const std::string& id) {
    request.set_backend(v1::CPU);
    (*request.mutable_inputs())["input"].mutable_handle()->set_id(id);
    request.add_outputs()->set_keep(true);
    v1::RunResponse response;
    grpc::ClientContext context;
    EXPECT_THAT(stub_->Run(&context, request, &response), GrpcOk());
    return response.outputs_size() == 1 ? response.outputs(0) : v1::Tensor();
  }

  std::vector<float> Fetched(const std::string& id) {
    v1::OutputHeader header;
    std::string data;
    EXPECT_THAT(FetchTensor(*stub_, id, {}, &header, &data), GrpcOk());
    return Unpack<float>(data);
  }

  int64_t Views(const char* op) const {
    return server_.engine().options().handles->views_total(op);
  }

  InProcessServer server_{{}};
  std::unique_ptr<v1::TensorOp::Stub> stub_;
  v1::TensorHandle input_;
};

TEST_F(LayoutViewsTest, TransposeIsAViewWithPermutedStrides) {
  v1::RunRequest request;
  for (int64_t axis : {0, 1, 3, 2}) request.mutable_transpose()->add_perm(axis);
  const v1::Tensor kept = Keep(request, input_.id());
  EXPECT_EQ(kept.handle().view_of(), input_.id());
  EXPECT_EQ(kept.handle().byte_offset(), 0);
  EXPECT_THAT(kept.strides(), ElementsAre(0, 0, 1, 4));
  EXPECT_EQ(Fetched(kept.handle().id()),
            (std::vector<float>{1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 4, 8, 12, 16}));
  EXPECT_EQ(Views("transpose"), 1);
}

TEST_F(LayoutViewsTest, ExpandIsAViewWithZeroStrides) {
  v1::RunRequest request;
  for (int64_t size : {2, 1, 1, 4}) request.mutable_expand()->add_sizes(size);
  const v1::Tensor kept = Keep(request, input_.id());
  EXPECT_EQ(kept.handle().view_of(), input_.id());
  EXPECT_THAT(kept.sizes(), ElementsAre(2, 1, 4, 4));
  EXPECT_THAT(kept.strides(), ElementsAre(0, 0, 4, 1));
  std::vector<float> twice = OneToSixteenFloats();
  twice.insert(twice.end(), twice.begin(), twice.end());
  EXPECT_EQ(Fetched(kept.handle().id()), twice);
  EXPECT_EQ(Views("expand"), 1);
}

TEST_F(LayoutViewsTest, ReshapeIsAViewWhereTheStridesAllowAndACopyElsewhere) {
  v1::RunRequest rows;
  for (int64_t size : {8, 2}) rows.mutable_reshape()->add_sizes(size);
  const v1::Tensor view = Keep(rows, input_.id());
  EXPECT_EQ(view.handle().view_of(), input_.id());
  EXPECT_THAT(view.strides(), ElementsAre(2, 1));
  EXPECT_EQ(Fetched(view.handle().id()), OneToSixteenFloats());
  EXPECT_EQ(Views("reshape"), 1);

  // The transpose's view steps down columns: flattened, no window says it.
  v1::RunRequest transpose;
  for (int64_t axis : {0, 1, 3, 2}) transpose.mutable_transpose()->add_perm(axis);
  const v1::Tensor columns = Keep(transpose, input_.id());
  v1::RunRequest flat;
  flat.mutable_reshape()->add_sizes(-1);
  const v1::Tensor copied = Keep(flat, columns.handle().id());
  EXPECT_THAT(copied.handle().view_of(), IsEmpty());
  EXPECT_THAT(copied.sizes(), ElementsAre(16));
  EXPECT_EQ(Fetched(copied.handle().id()), Fetched(columns.handle().id()));
  EXPECT_EQ(Views("reshape"), 1);
  EXPECT_EQ(Views("transpose"), 1);
}

}  // namespace
}  // namespace tensorop::testing
