// Where one input's bytes are. A front end names the inputs it holds apart
// from the request (UploadedInputs); planning resolves every input once into
// its source (PlannedRun::sources), and every later step asks the source, not
// the request.
#ifndef TENSOROP_SERVER_PIPELINE_INPUT_SOURCE_H_
#define TENSOROP_SERVER_PIPELINE_INPUT_SOURCE_H_

#include <cstddef>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "server/data/handle_store.h"

namespace tensorop::server {

struct InputSource {
  enum class Kind {
    kInline,        // the request's own data
    kUploaded,      // one buffer held apart: an upload, a copy out of the
                    // received bytes, an earlier chain step's output
    kReceived,      // pieces of whole elements, in order, where gRPC received them
    kSharedMemory,  // a span of a registered region
    kHostHandle,    // a resident tensor in host memory
    kDeviceHandle,  // a resident tensor on an OpenCL device: no host bytes
  };

  static InputSource Uploaded(std::span<const std::byte> bytes) {
    InputSource source;
    source.kind = Kind::kUploaded;
    source.bytes = bytes;
    return source;
  }
  static InputSource Received(std::vector<std::span<const std::byte>> pieces) {
    InputSource source;
    source.kind = Kind::kReceived;
    source.pieces = std::move(pieces);
    return source;
  }
  static InputSource OnDevice(const ResidentTensor* tensor) {
    InputSource source;
    source.kind = Kind::kDeviceHandle;
    source.tensor = tensor;
    return source;
  }

  Kind kind = Kind::kInline;
  // Where the host reads them; empty for kReceived and kDeviceHandle.
  std::span<const std::byte> bytes;
  std::vector<std::span<const std::byte>> pieces;  // kReceived
  const ResidentTensor* tensor = nullptr;          // kDeviceHandle
};

// The inputs a front end holds apart from the request (kUploaded, kReceived),
// by name: they stand for the request's own data of those inputs.
using UploadedInputs = std::map<std::string, InputSource, std::less<>>;

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PIPELINE_INPUT_SOURCE_H_
