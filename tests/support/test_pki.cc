#include "tests/support/test_pki.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace tensorop::testing {

namespace {
constexpr char kOpenSsl[] = "/usr/bin/openssl";
}  // namespace

TestPki::TestPki() {
  char dir[] = "/tmp/tensorop-pki-XXXXXX";
  if (mkdtemp(dir) == nullptr) std::abort();
  dir_ = dir;
}

TestPki::~TestPki() { RunCommand({"/bin/rm", "-rf", dir_}); }

void TestPki::OpenSsl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {kOpenSsl};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult result = RunCommand(argv);
  if (result.exit_code != 0) {
    std::string line;
    for (const std::string& arg : argv) line += arg + " ";
    FAIL() << "openssl failed (" << result.exit_code << "): " << line << "\n" << result.err;
  }
}

void TestPki::MakeCa(const std::string& name, const std::string& common_name) {
  OpenSsl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", Path(name + ".key"), "-out", Path(name + ".crt"), "-subj",
           "/O=tensorop test/CN=" + common_name, "-days", "30"});
}

void TestPki::MakeCert(const std::string& name, const std::string& ca,
                       const std::string& common_name, const std::string& san, int days) {
  std::vector<std::string> request = {"req",
                                      "-newkey",
                                      "ec",
                                      "-pkeyopt",
                                      "ec_paramgen_curve:P-256",
                                      "-nodes",
                                      "-keyout",
                                      Path(name + ".key"),
                                      "-out",
                                      Path(name + ".csr"),
                                      "-subj",
                                      "/O=tensorop test/CN=" + common_name};
  if (!san.empty()) {
    request.push_back("-addext");
    request.push_back("subjectAltName=" + san);
  }
  OpenSsl(request);
  OpenSsl({"x509", "-req", "-in", Path(name + ".csr"), "-CA", Path(ca + ".crt"), "-CAkey",
           Path(ca + ".key"), "-CAcreateserial", "-copy_extensions", "copy", "-days",
           std::to_string(days), "-out", Path(name + ".crt")});
}

std::string TestPki::Read(const std::string& file) const {
  std::ifstream in(Path(file));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void TestPki::Replace(const std::string& file, const std::string& text) const {
  const std::string temp = Path(file + ".tmp");
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  std::rename(temp.c_str(), Path(file).c_str());
}

}  // namespace tensorop::testing
