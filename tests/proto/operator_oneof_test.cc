// RunRequest.op and ChainStep.op declare the operators twice in the proto; the
// two must agree (names, types, order) for CopyOperator to carry every one.
#include "proto/operator_oneof.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <gtest/gtest.h>

#include "tensorop/v1/tensorop.pb.h"

namespace tensorop {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::OneofDescriptor;
using google::protobuf::Reflection;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;
using ::testing::Not;

// "name: full message type" of each field of `type`'s oneof op, in order.
std::vector<std::string> OperatorFields(const Descriptor& type) {
  const OneofDescriptor* op = type.FindOneofByName("op");
  if (op == nullptr) return {};
  std::vector<std::string> fields;
  for (int i = 0; i < op->field_count(); ++i) {
    const FieldDescriptor& field = *op->field(i);
    fields.push_back(field.name() + ": " +
                     (field.message_type() != nullptr ? field.message_type()->full_name()
                                                      : std::string("not a message")));
  }
  return fields;
}

TEST(OperatorOneofTest, RunRequestAndChainStepDeclareTheSameOperators) {
  const std::vector<std::string> request = OperatorFields(*v1::RunRequest::descriptor());
  ASSERT_THAT(request, Not(IsEmpty()));
  EXPECT_THAT(OperatorFields(*v1::ChainStep::descriptor()), ElementsAreArray(request));
}

// `attrs` with every int64 field set (a repeated one to two entries), each to
// a value of its own, so a copy that lost or mixed a field shows.
void FillInt64Fields(Message* attrs) {
  const Reflection& reflection = *attrs->GetReflection();
  const Descriptor& type = *attrs->GetDescriptor();
  for (int i = 0; i < type.field_count(); ++i) {
    const FieldDescriptor* field = type.field(i);
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_INT64) continue;
    if (field->is_repeated()) {
      reflection.AddInt64(attrs, field, 10 * i + 1);
      reflection.AddInt64(attrs, field, -(10 * i + 2));
    } else {
      reflection.SetInt64(attrs, field, 10 * i + 3);
    }
  }
}

// `message` (a RunRequest or ChainStep) holding operator `name`, its attrs filled.
void SetOperator(const std::string& name, Message* message) {
  const FieldDescriptor* field = message->GetDescriptor()->FindFieldByName(name);
  ASSERT_NE(field, nullptr) << name;
  FillInt64Fields(message->GetReflection()->MutableMessage(message, field));
}

// The name of the operator `message` holds, or "" when none.
std::string OperatorName(const Message& message) {
  const FieldDescriptor* set = message.GetReflection()->GetOneofFieldDescriptor(
      message, message.GetDescriptor()->FindOneofByName("op"));
  return set != nullptr ? set->name() : "";
}

std::string OperatorBytes(const Message& message) {
  const FieldDescriptor* set = message.GetReflection()->GetOneofFieldDescriptor(
      message, message.GetDescriptor()->FindOneofByName("op"));
  return set != nullptr ? message.GetReflection()->GetMessage(message, set).SerializeAsString()
                        : "";
}

TEST(OperatorOneofTest, CopiesEveryOperatorBothWays) {
  const OneofDescriptor& op = *v1::RunRequest::descriptor()->FindOneofByName("op");
  for (int i = 0; i < op.field_count(); ++i) {
    const std::string name = op.field(i)->name();
    v1::RunRequest request;
    SetOperator(name, &request);
    v1::ChainStep step;
    CopyOperator(request, &step);
    EXPECT_EQ(OperatorName(step), name);
    EXPECT_EQ(OperatorBytes(step), OperatorBytes(request)) << name;

    v1::RunRequest back;
    CopyOperator(step, &back);
    EXPECT_EQ(OperatorName(back), name);
    EXPECT_EQ(OperatorBytes(back), OperatorBytes(request)) << name;
  }
}

TEST(OperatorOneofTest, ReplacesTheOperatorHeldAndClearsItWhenNoneIsSet) {
  v1::RunRequest split;
  split.mutable_split()->set_axis(1);
  v1::ChainStep step;
  step.mutable_slice()->add_offsets(4);
  CopyOperator(split, &step);
  EXPECT_EQ(step.op_case(), v1::ChainStep::kSplit);
  EXPECT_EQ(step.split().axis(), 1);

  CopyOperator(v1::RunRequest(), &step);
  EXPECT_EQ(step.op_case(), v1::ChainStep::OP_NOT_SET);
}

}  // namespace
}  // namespace tensorop
