// Seed inputs for the fuzz targets, from the public conformance cases:
//   make_seeds CASES_DIR OUT_DIR [FLAG_FILE...]
// writes OUT_DIR/run/ (each case's RunRequest), run_bidi/ (a file's cases as
// one stream of frames), run_chunked/ (each request with its input bytes sent
// as chunks), case_format/ (each case as its own JSON text) and flag_file/
// (the given flag files); and the hostile requests of issue 42 (HostileSeeds:
// long ids, floods of unknown fields). scripts/fuzz.sh merges them into the
// kept corpus.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "client/case_format.h"
#include "nlohmann/json.hpp"
#include "tests/fuzz/fuzz_support.h"

namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The fuzzers' -max_len (scripts/fuzz.sh): a longer seed would be cut short.
constexpr size_t kMaxSeedBytes = 64 << 10;

void Write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  if (bytes.size() > kMaxSeedBytes) return;
  fs::create_directories(dir);
  std::string file = name;
  std::replace_if(
      file.begin(), file.end(), [](char c) { return !std::isalnum(c) && c != '_'; }, '_');
  std::ofstream(dir / file, std::ios::binary) << bytes;
}

std::string Serialize(const google::protobuf::Message& message) {
  std::string wire;
  message.SerializeToString(&wire);
  return wire;
}

// `value` as a protobuf varint.
std::string Varint(uint64_t value) {
  std::string bytes;
  do {
    bytes.push_back(static_cast<char>((value & 0x7f) | (value >= 0x80 ? 0x80 : 0)));
    value >>= 7;
  } while (value != 0);
  return bytes;
}

// The request with each input's data sent as two chunks after it.
std::string Chunked(const tensorop::v1::RunRequest& request) {
  tensorop::v1::RequestPart first;
  *first.mutable_request() = request;
  std::vector<std::string> frames;
  std::vector<tensorop::v1::RequestPart> chunks;
  for (auto& [name, tensor] : *first.mutable_request()->mutable_inputs()) {
    const std::string data = tensor.data();
    tensor.clear_data();
    const size_t half = data.size() / 2;
    for (const std::string& piece : {data.substr(0, half), data.substr(half)}) {
      tensorop::v1::RequestPart part;
      part.mutable_chunk()->set_input(name);
      part.mutable_chunk()->set_data(piece);
      chunks.push_back(part);
    }
  }
  frames.push_back(Serialize(first));
  for (const auto& part : chunks) frames.push_back(Serialize(part));
  return tensorop::fuzz::JoinFrames(frames);
}

// A small slice of a 4-byte input, named `id`.
tensorop::v1::RunRequest SliceRequest(const std::string& id) {
  tensorop::v1::RunRequest request;
  request.set_id(id);
  request.mutable_slice()->add_offsets(1);
  request.mutable_slice()->add_window_sizes(2);
  request.mutable_slice()->add_window_strides(1);
  tensorop::v1::Tensor& input = (*request.mutable_inputs())["input"];
  input.set_dtype(tensorop::v1::UINT8);
  input.add_sizes(4);
  input.set_data("abcd");
  return request;
}

// `message` followed by varint fields numbered 15 (none of our messages has
// one) until it is `bytes` long.
std::string WithUnknownVarints(const std::string& message, size_t bytes) {
  std::string wire = message;
  while (wire.size() + 2 <= bytes) wire.append("\x78\x01", 2);
  return wire;
}

// Unknown fields of every wire type, groups nested in groups, and known
// fields sent with a wire type not theirs (kept as unknown fields too).
std::string UnknownFieldsOfEveryKind(int rounds) {
  std::string wire;
  for (int i = 0; i < rounds; ++i) {
    wire.append("\x78\x96\x01", 3);                          // 15: varint 150
    wire.append("\x79\x01\x02\x03\x04\x05\x06\x07\x08", 9);  // 15: fixed64
    wire.append("\x7d\x01\x02\x03\x04", 5);                  // 15: fixed32
    wire.append("\x7a\x03\x61\x62\x63", 5);                  // 15: "abc"
    wire.append("\x7b\x08\x01\x13\x13\x14\x14\x7c", 8);  // 15: group {1: 1, 2: group {2: group {}}}
    wire.append("\x08\x01", 2);                          // id (a string) as a varint
    wire.append("\x15\x00\x00\x00\x00", 5);              // slice (a message) as a fixed32
  }
  return wire;
}

// The hostile requests of issue 42 (RELIABILITY.md, "The third attack"), each
// within the fuzzers' -max_len: a Run request whose id takes it to 64 KiB;
// one flooded with unknown varints to 64 KiB; unknown fields of every kind;
// as RunBidi frames and as RunChunked parts. Release, ListHandles and
// RunChain requests have no fuzzer.
void HostileSeeds(const fs::path& out) {
  const std::string small = Serialize(SliceRequest("a"));
  const size_t id_bytes = kMaxSeedBytes - small.size() - 3;  // its length takes 3 bytes more
  const std::string long_id = Serialize(SliceRequest(std::string(id_bytes, 'i')));
  Write(out / "run", "hostile_long_id", long_id);
  Write(out / "run", "hostile_unknown_varints", WithUnknownVarints(small, kMaxSeedBytes));
  Write(out / "run", "hostile_unknown_fields", small + UnknownFieldsOfEveryKind(256));

  Write(out / "run_bidi", "hostile_long_ids",
        tensorop::fuzz::JoinFrames({Serialize(SliceRequest(std::string(16000, 'b'))),
                                    Serialize(SliceRequest(std::string(16000, 'c'))), small,
                                    Serialize(SliceRequest(std::string(16000, 'd')))}));
  Write(out / "run_bidi", "hostile_unknown_varints",
        tensorop::fuzz::JoinFrames(
            {WithUnknownVarints(small, 32 << 10), small, small + UnknownFieldsOfEveryKind(64)}));

  // RunChunked: a request part (RequestPart.request = 1) with a long id, and
  // one whose request and part are flooded, each followed by its chunk.
  tensorop::v1::RequestPart chunk;
  chunk.mutable_chunk()->set_input("input");
  chunk.mutable_chunk()->set_data("abcd");
  for (auto [name, request] : {std::pair{"hostile_long_id", SliceRequest(std::string(32000, 'k'))},
                               std::pair{"hostile_unknown_varints", SliceRequest("f")}}) {
    request.mutable_inputs()->at("input").clear_data();
    tensorop::v1::RequestPart first;
    *first.mutable_request() = request;
    std::string first_wire = Serialize(first);
    if (std::string(name) == "hostile_unknown_varints") {
      // The flood inside the request (field 1 of the part), then in the part.
      const std::string flooded = WithUnknownVarints(Serialize(request), 24 << 10);
      first_wire = std::string("\x0a") + Varint(flooded.size()) + flooded;
      first_wire = WithUnknownVarints(first_wire, first_wire.size() + (16 << 10));
    }
    Write(out / "run_chunked", name, tensorop::fuzz::JoinFrames({first_wire, Serialize(chunk)}));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: make_seeds CASES_DIR OUT_DIR [FLAG_FILE...]\n";
    return 2;
  }
  const fs::path out = argv[2];
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(argv[1])) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    const std::string text = Slurp(file);
    const std::string stem = file.stem().string();
    nlohmann::json root = nlohmann::json::parse(text);
    if (!root.is_array()) root = nlohmann::json::array({root});
    for (size_t i = 0; i < root.size(); ++i) {
      Write(out / "case_format", stem + "_" + std::to_string(i), root[i].dump());
    }
    absl::StatusOr<std::vector<tensorop::client::LoadedCase>> cases =
        tensorop::client::ParseCases(text);
    if (!cases.ok()) {
      std::cerr << file << ": " << cases.status() << "\n";
      return 1;
    }
    std::vector<std::string> stream;
    for (const auto& loaded : *cases) {
      if (!loaded.parsed.ok()) continue;
      const tensorop::v1::RunRequest& request = loaded.parsed->request;
      Write(out / "run", loaded.name, Serialize(request));
      Write(out / "run_chunked", loaded.name, Chunked(request));
      stream.push_back(Serialize(request));
      if (stream.size() == 4) {
        Write(out / "run_bidi", loaded.name, tensorop::fuzz::JoinFrames(stream));
        stream.clear();
      }
    }
    if (!stream.empty())
      Write(out / "run_bidi", stem + "_rest", tensorop::fuzz::JoinFrames(stream));
  }
  HostileSeeds(out);
  for (int i = 3; i < argc; ++i) {
    Write(out / "flag_file", fs::path(argv[i]).filename().string() + std::to_string(i),
          Slurp(argv[i]));
  }
  return 0;
}
