// The operator of a request and of a chain step: both messages hold it in a
// oneof `op` whose fields agree by name and type (RunRequest.op and
// ChainStep.op; OperatorOneofTest fails when they do not), so one copy by
// reflection serves every operator, the ones still to come included.
#ifndef TENSOROP_PROTO_OPERATOR_ONEOF_H_
#define TENSOROP_PROTO_OPERATOR_ONEOF_H_

#include <google/protobuf/message.h>

namespace tensorop {

// The field of `from`'s oneof `op` that is set, copied into `to`'s field of
// the same name (replacing any operator `to` held); `to`'s op left unset when
// `from` sets none. Both messages have a oneof `op`.
void CopyOperator(const google::protobuf::Message& from, google::protobuf::Message* to);

}  // namespace tensorop

#endif  // TENSOROP_PROTO_OPERATOR_ONEOF_H_
