#include "server/memory/received_bytes.h"

namespace tensorop::server {

absl::Status ReceivedBytes::Reserve(absl::string_view method) {
  return reservation_.Grow(static_cast<int64_t>(length()), method, "the request as received");
}

void ReceivedBytes::Release() {
  if (bytes_ != nullptr) bytes_->Clear();
  reservation_.Release();
}

MemoryBudget::Reservation ReceivedBytes::ReleaseKeeping(int64_t kept_bytes) {
  MemoryBudget::Reservation cover = reservation_.Sibling();
  reservation_.TransferTo(cover, kept_bytes);  // at most what is held
  Release();
  return cover;
}

}  // namespace tensorop::server
