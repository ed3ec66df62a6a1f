// The conformance case format (client/case_format.h) on arbitrary text: case
// loading never crashes, and every expected tensor it accepts survives the
// client's own rendering: TensorToJson, read back through the exact-decimal
// reader, gives the same bits (NaNs render as "nan" and read back as the
// canonical NaN, so a NaN only has to stay a NaN), and a case compares equal to
// its own expectation.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/case_compare.h"
#include "client/case_format.h"
#include "client/element_codec.h"
#include "client/exact_json.h"
#include "client/host_tensor.h"

namespace {

using tensorop::client::Case;
using tensorop::client::HostTensor;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what.c_str());
  std::abort();
}

void CheckRoundTrip(const HostTensor& tensor, const std::string& where) {
  absl::StatusOr<std::string> json = tensorop::client::TensorToJson(tensor);
  if (!json.ok()) Fail(absl::StrCat(where, ": TensorToJson: ", json.status().ToString()));
  absl::StatusOr<nlohmann::json> parsed = tensorop::client::ParseJson(*json);
  if (!parsed.ok()) Fail(absl::StrCat(where, ": rendered JSON does not parse: ", *json));
  absl::StatusOr<HostTensor> back = tensorop::client::TensorFromJson(*parsed);
  if (!back.ok()) {
    Fail(absl::StrCat(where, ": ", *json, " reads back as ", back.status().ToString()));
  }
  if (back->dtype != tensor.dtype || back->sizes != tensor.sizes ||
      back->data.size() != tensor.data.size()) {
    Fail(absl::StrCat(where, ": ", *json, " reads back with another layout"));
  }
  const int size = tensorop::client::ElementSize(tensor.dtype);
  for (size_t offset = 0; offset + size <= tensor.data.size(); offset += size) {
    const char* want = tensor.data.data() + offset;
    const char* got = back->data.data() + offset;
    if (std::memcmp(want, got, size) == 0) continue;
    const std::string text = tensorop::client::ElementToJson(tensor.dtype, want);
    if (text == "\"nan\"" && tensorop::client::ElementToJson(tensor.dtype, got) == text) {
      continue;
    }
    Fail(absl::StrCat(where, ": element ", offset / size, " renders as ", text,
                      " and reads back as ", tensorop::client::ElementToJson(tensor.dtype, got)));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<tensorop::client::LoadedCase>> cases =
      tensorop::client::ParseCases(text);
  if (!cases.ok()) return 0;
  for (const tensorop::client::LoadedCase& loaded : *cases) {
    if (!loaded.parsed.ok()) continue;
    const Case& c = *loaded.parsed;
    std::string wire;
    if (!c.request.SerializeToString(&wire)) Fail("a case's request does not serialize");
    for (size_t i = 0; i < c.expected_outputs.size(); ++i) {
      CheckRoundTrip(c.expected_outputs[i], absl::StrCat(loaded.name, ": outputs[", i, "]"));
    }
    // The expectation against itself, with the case's output strides dropped
    // (they say what the server must answer with, and these are packed).
    Case packed = c;
    packed.request.clear_outputs();
    tensorop::client::Result self{.outputs = c.expected_outputs, .backend = "cpu"};
    if (std::optional<std::string> mismatch = tensorop::client::FindMismatch(packed, self);
        mismatch.has_value() && c.expected_error == absl::StatusCode::kOk) {
      Fail(absl::StrCat(loaded.name, ": differs from itself: ", *mismatch));
    }
    tensorop::client::RunLineJson(loaded.name, self);
  }
  return 0;
}
