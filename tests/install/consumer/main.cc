// consumer TARGET CASE_FILE CASE_NAME: runs one conformance case on tensord
// at TARGET with the installed client and says whether the answer is
// byte-exact. Exit 0 only when it is. The installed headers are included by
// the package's prefix; "client/client.h" is the consumer's own.
#include <cstdio>
#include <optional>
#include <string>

#include <tensorop/client/case_compare.h>
#include <tensorop/client/case_format.h>
#include <tensorop/client/client.h>

#include "client/client.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: consumer TARGET CASE_FILE CASE_NAME\n");
    return 2;
  }
  namespace client = tensorop::client;
  const auto cases = client::LoadCases(argv[2]);
  if (!cases.ok()) {
    std::fprintf(stderr, "%s\n", std::string(cases.status().message()).c_str());
    return 1;
  }
  for (const client::LoadedCase& loaded : *cases) {
    if (loaded.name != argv[3] || !loaded.parsed.ok()) continue;
    client::Client tensord(argv[1]);
    const auto result = tensord.Run(loaded.parsed->request);
    if (const std::optional<std::string> mismatch = client::FindMismatch(*loaded.parsed, result)) {
      std::printf("%s: %s\n", argv[3], mismatch->c_str());
      return 1;
    }
    std::printf("%s: byte-exact (%s)\n", argv[3], consumer::Tag());
    return 0;
  }
  std::fprintf(stderr, "no readable case %s in %s\n", argv[3], argv[2]);
  return 1;
}
