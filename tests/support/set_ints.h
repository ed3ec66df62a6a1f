// SetInts(message.mutable_sizes(), {2, 3}): protobuf's RepeatedField has no
// initializer-list Assign.
#ifndef TENSOROP_TESTS_SUPPORT_SET_INTS_H_
#define TENSOROP_TESTS_SUPPORT_SET_INTS_H_

#include <cstdint>
#include <initializer_list>

#include <google/protobuf/repeated_field.h>

namespace tensorop::testing {

inline void SetInts(google::protobuf::RepeatedField<int64_t>* field,
                    std::initializer_list<int64_t> values) {
  field->Assign(values.begin(), values.end());
}

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_SET_INTS_H_
