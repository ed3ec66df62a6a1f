// Certificates for the transport-security tests, made at test time by Debian's
// openssl binary in a private directory removed afterwards: CAs, and server or
// client certificates (P-256 keys) signed by them, valid or already expired.
#ifndef TENSOROP_TESTS_SUPPORT_TEST_PKI_H_
#define TENSOROP_TESTS_SUPPORT_TEST_PKI_H_

#include <string>
#include <vector>

namespace tensorop::testing {

class TestPki {
 public:
  TestPki();  // an empty directory under /tmp
  ~TestPki();
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  // NAME.crt and NAME.key: a self-signed CA with common name `common_name`.
  void MakeCa(const std::string& name, const std::string& common_name);
  // NAME.crt and NAME.key: a certificate for `common_name` with the subject
  // alternative names `san` ("DNS:localhost,IP:127.0.0.1"; empty: none), signed
  // by the CA `ca`, valid for `days` from now (negative: expired that long ago).
  void MakeCert(const std::string& name, const std::string& ca, const std::string& common_name,
                const std::string& san, int days = 30);
  // A server certificate for loopback ("localhost" and 127.0.0.1).
  void MakeServerCert(const std::string& name, const std::string& ca) {
    MakeCert(name, ca, "tensord", "DNS:localhost,IP:127.0.0.1");
  }

  // DIR/FILE ("server.crt").
  std::string Path(const std::string& file) const { return dir_ + "/" + file; }
  std::string Read(const std::string& file) const;
  // Replaces DIR/FILE with `text` at once (write elsewhere, rename), as
  // Kubernetes updates a mounted Secret.
  void Replace(const std::string& file, const std::string& text) const;
  // Copies DIR/FROM over DIR/TO at once.
  void Copy(const std::string& from, const std::string& to) const { Replace(to, Read(from)); }

 private:
  // Runs openssl with `args`; fails the test (fatally) if it fails.
  void OpenSsl(const std::vector<std::string>& args) const;
  std::string dir_;
};

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_TEST_PKI_H_
