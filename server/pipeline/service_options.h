// What the tensorop.v1 service and its pipeline (server/pipeline/pipeline.h) are
// configured with.
#ifndef TENSOROP_SERVER_PIPELINE_SERVICE_OPTIONS_H_
#define TENSOROP_SERVER_PIPELINE_SERVICE_OPTIONS_H_

#include <cstdint>

#include "absl/time/time.h"
#include "core/limits.h"
#include "server/data/shared_memory.h"
#include "server/memory/buffer_pool.h"
#include "server/memory/memory_budget.h"

namespace tensorop::server {

class Metrics;
class HandleStore;

struct ServiceOptions {
  Limits limits;
  // The gRPC message limit (both ways): a unary or RunBidi answer must fit.
  int64_t max_message_bytes = int64_t{64} << 20;
  // Data bytes per ResultPart chunk in RunStream and RunChunked.
  int64_t chunk_bytes = int64_t{1} << 20;
  // The most steps a RunChain request may have (--max_chain_steps).
  int max_chain_steps = 64;
  // Where finished calls are counted besides the request log; null: nowhere.
  // Not owned; must outlive the service.
  Metrics* metrics = nullptr;
  // What every call's memory is reserved against (--max_memory_bytes); null:
  // no budget. Not owned; must outlive the service.
  MemoryBudget* memory_budget = nullptr;
  // A call whose client sends nothing (a RunChunked upload) or takes nothing
  // (a result part, a RunBidi answer, a unary answer) this long is cancelled
  // (--idle_timeout_seconds); zero: never.
  absl::Duration idle_timeout = absl::ZeroDuration();
  // Registered shared memory regions (server/data/shared_memory.h); null: the
  // shared memory calls are FAILED_PRECONDITION. Not owned; must outlive the
  // service.
  SharedMemoryRegistry* shared_memory = nullptr;
  // Where large output buffers are kept between calls (--buffer_pool_bytes);
  // null: each is allocated fresh. Not owned; must outlive the service.
  BufferPool* buffer_pool = nullptr;
  // Tensors that stay on the server (Put, OutputDesc.keep); null: the handle
  // calls are FAILED_PRECONDITION. Not owned; must outlive the service.
  HandleStore* handles = nullptr;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PIPELINE_SERVICE_OPTIONS_H_
