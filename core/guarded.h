// Guarded(work): runs `work`, turning an exception into a status, so a task or
// a reaction never leaves its call unfinished.
#ifndef TENSOROP_CORE_GUARDED_H_
#define TENSOROP_CORE_GUARDED_H_

#include <exception>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tensorop {

template <typename Work>
absl::Status Guarded(Work work) {
  try {
    return work();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory for the request");
  } catch (const std::exception& error) {
    return absl::InternalError(absl::StrCat("unexpected error: ", error.what()));
  } catch (...) {
    return absl::InternalError("unexpected error");
  }
}

}  // namespace tensorop

#endif  // TENSOROP_CORE_GUARDED_H_
