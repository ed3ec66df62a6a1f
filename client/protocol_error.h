// The status of an answer that breaks the protocol (an unexpected message or
// field): INTERNAL, since retrying the same call cannot help.
#ifndef TENSOROP_CLIENT_PROTOCOL_ERROR_H_
#define TENSOROP_CLIENT_PROTOCOL_ERROR_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tensorop::client {

inline absl::Status ProtocolError(absl::string_view what) {
  return absl::InternalError(absl::StrCat("server broke the protocol: ", what));
}

}  // namespace tensorop::client

#endif  // TENSOROP_CLIENT_PROTOCOL_ERROR_H_
