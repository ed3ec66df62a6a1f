#include "proto/operator_oneof.h"

#include <google/protobuf/descriptor.h>

namespace tensorop {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::OneofDescriptor;
using google::protobuf::Reflection;

void CopyOperator(const Message& from, Message* to) {
  const Reflection& from_reflection = *from.GetReflection();
  const Reflection& to_reflection = *to->GetReflection();
  const Descriptor& to_type = *to->GetDescriptor();
  to_reflection.ClearOneof(to, to_type.FindOneofByName("op"));
  const OneofDescriptor* from_op = from.GetDescriptor()->FindOneofByName("op");
  const FieldDescriptor* set = from_reflection.GetOneofFieldDescriptor(from, from_op);
  if (set == nullptr) return;
  // Same name, same message type: OperatorOneofTest holds the two oneofs to it.
  const FieldDescriptor* field = to_type.FindFieldByName(set->name());
  if (field == nullptr || field->message_type() != set->message_type()) return;
  to_reflection.MutableMessage(to, field)->CopyFrom(from_reflection.GetMessage(from, set));
}

}  // namespace tensorop
