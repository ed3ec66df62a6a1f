// A request's bytes as gRPC received them, with the share of the memory budget
// they hold: reserved before anything is done with them, given back when they
// are let go (once parsed, or copied out), whoever lets them go. What a view
// keeps of them (a large input's data left where it arrived) leaves with its
// own reservation, the cover of those bytes.
#ifndef TENSOROP_SERVER_MEMORY_RECEIVED_BYTES_H_
#define TENSOROP_SERVER_MEMORY_RECEIVED_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <utility>

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/memory/memory_budget.h"

namespace tensorop::server {

class ReceivedBytes {
 public:
  // Holds nothing.
  ReceivedBytes() = default;
  // `bytes`, gRPC's (they outlive this object; it only ever empties them),
  // their share of the budget to be held in `reservation`, an empty one of
  // the call's (its Sibling) that is this object's from here.
  ReceivedBytes(const grpc::ByteBuffer* bytes, MemoryBudget::Reservation reservation)
      : bytes_(const_cast<grpc::ByteBuffer*>(bytes)), reservation_(std::move(reservation)) {}
  // A moved-from one holds nothing, so its Release cannot empty the buffer
  // its successor holds.
  ReceivedBytes(ReceivedBytes&& other) noexcept
      : bytes_(std::exchange(other.bytes_, nullptr)), reservation_(std::move(other.reservation_)) {}
  ReceivedBytes& operator=(ReceivedBytes&& other) noexcept {
    bytes_ = std::exchange(other.bytes_, nullptr);
    reservation_ = std::move(other.reservation_);
    return *this;
  }

  // Reserves the bytes, as they arrived, for `method` (once, before anything
  // is done with them): RESOURCE_EXHAUSTED naming --max_memory_bytes when
  // they do not fit.
  absl::Status Reserve(absl::string_view method);

  const grpc::ByteBuffer& bytes() const { return *bytes_; }
  // Their length as they arrived (0 once let go).
  size_t length() const { return bytes_ == nullptr ? 0 : bytes_->Length(); }
  // The bytes of the budget they hold.
  int64_t reserved() const { return reservation_.bytes(); }

  // Lets the slices go (gRPC keeps the ByteBuffer object, now empty, until
  // the call ends) and gives their reservation back.
  void Release();
  // The same, but the `kept_bytes` of them that a view still holds stay
  // reserved: in the reservation returned, the view's cover from here.
  MemoryBudget::Reservation ReleaseKeeping(int64_t kept_bytes);

 private:
  grpc::ByteBuffer* bytes_ = nullptr;
  MemoryBudget::Reservation reservation_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_MEMORY_RECEIVED_BYTES_H_
