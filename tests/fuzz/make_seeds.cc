// Seed inputs for the fuzz targets, from the public conformance cases:
//   make_seeds CASES_DIR OUT_DIR [FLAG_FILE...]
// writes OUT_DIR/run/ (each case's RunRequest), run_bidi/ (a file's cases as
// one stream of frames), run_chunked/ (each request with its input bytes sent
// as chunks), case_format/ (each case as its own JSON text) and flag_file/
// (the given flag files). scripts/fuzz.sh merges them into the kept corpus.
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
  for (int i = 3; i < argc; ++i) {
    Write(out / "flag_file", fs::path(argv[i]).filename().string() + std::to_string(i),
          Slurp(argv[i]));
  }
  return 0;
}
