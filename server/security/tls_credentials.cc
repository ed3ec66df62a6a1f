#include "server/security/tls_credentials.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "absl/strings/str_cat.h"

namespace tensorop::server {

std::string OpenSslError() {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return "";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}
namespace {

// gRPC's provider looks at its files this often (its minimum).
constexpr int kRefreshSeconds = 1;
constexpr char kIdentityName[] = "identity.pem";  // chain and key, renamed in together
constexpr char kCaName[] = "client_ca.pem";

std::string FlagFile(absl::string_view flag, absl::string_view path) {
  return absl::StrCat("--", flag, "=", path);
}

absl::StatusOr<std::string> ReadWhole(absl::string_view flag, const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(FlagFile(flag, path), ": cannot read the file: ", std::strerror(errno)));
  }
  std::string text;
  char buffer[8192];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, got);
  const bool failed = std::ferror(file) != 0;
  const int error = errno;
  std::fclose(file);
  if (failed) {
    return absl::InvalidArgumentError(
        absl::StrCat(FlagFile(flag, path), ": cannot read the file: ", std::strerror(error)));
  }
  if (text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(FlagFile(flag, path), ": the file is empty"));
  }
  return text;
}

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Deleter {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;

BioPtr MemoryBio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// Never prompts for a passphrase: an encrypted key simply fails to load.
int NoPassphrase(char*, int, int, void*) { return 0; }

std::string Asn1Time(const ASN1_TIME* time) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(bio.get(), time);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

// The first certificate of `pem` and how many there are; an error naming the
// flag and file when there is none.
absl::StatusOr<std::pair<X509Ptr, int>> ParseCertificates(absl::string_view flag,
                                                          const std::string& path,
                                                          const std::string& pem) {
  BioPtr bio = MemoryBio(pem);
  X509Ptr first;
  int count = 0;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr)) {
    if (count++ == 0) {
      first.reset(cert);
    } else {
      X509_free(cert);
    }
  }
  ERR_clear_error();  // the loop ends on "no start line"
  if (count == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        FlagFile(flag, path), ": no PEM certificate (-----BEGIN CERTIFICATE-----) in the file"));
  }
  return std::make_pair(std::move(first), count);
}

std::string ReadableFile(const std::string& dir, const char* name) {
  return absl::StrCat(dir, "/", name);
}

// Writes `text` to dir/name through a temporary name and a rename, so a reader
// sees the old file or the new one, never a part.
absl::Status WriteAtomically(const std::string& dir, const char* name, const std::string& text) {
  const std::string final_path = ReadableFile(dir, name);
  const std::string temp_path = final_path + ".new";
  const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot write ", temp_path, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t wrote = ::write(fd, text.data() + done, text.size() - done);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      return absl::InternalError(
          absl::StrCat("cannot write ", temp_path, ": ", std::strerror(error)));
    }
    done += static_cast<size_t>(wrote);
  }
  ::close(fd);
  if (std::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot rename ", temp_path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TlsMaterial> CheckTlsFiles(const TlsFiles& files) {
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert_file and --tls_key_file go together: give both");
  }
  if (files.cert_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert_file and --tls_key_file are required for TLS");
  }
  TlsMaterial material;
  absl::StatusOr<std::string> chain = ReadWhole("tls_cert_file", files.cert_file);
  if (!chain.ok()) return chain.status();
  material.cert_chain = *std::move(chain);
  absl::StatusOr<std::string> key = ReadWhole("tls_key_file", files.key_file);
  if (!key.ok()) return key.status();
  material.private_key = *std::move(key);

  absl::StatusOr<std::pair<X509Ptr, int>> certs =
      ParseCertificates("tls_cert_file", files.cert_file, material.cert_chain);
  if (!certs.ok()) return certs.status();
  X509* cert = certs->first.get();
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(FlagFile("tls_cert_file", files.cert_file),
                                                   ": the certificate expired on ",
                                                   Asn1Time(X509_get0_notAfter(cert))));
  }
  BioPtr key_bio = MemoryBio(material.private_key);
  KeyPtr pkey(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, NoPassphrase, nullptr));
  if (pkey == nullptr) {
    const std::string reason = OpenSslError();
    return absl::InvalidArgumentError(
        absl::StrCat(FlagFile("tls_key_file", files.key_file),
                     ": no unencrypted PEM private key (-----BEGIN PRIVATE KEY-----) in the file",
                     reason.empty() ? "" : absl::StrCat(" (", reason, ")")));
  }
  if (X509_check_private_key(cert, pkey.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(FlagFile("tls_key_file", files.key_file),
                                                   ": the key does not match the certificate in ",
                                                   FlagFile("tls_cert_file", files.cert_file)));
  }
  if (!files.client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadWhole("tls_client_ca_file", files.client_ca_file);
    if (!ca.ok()) return ca.status();
    material.client_ca = *std::move(ca);
    absl::StatusOr<std::pair<X509Ptr, int>> cas =
        ParseCertificates("tls_client_ca_file", files.client_ca_file, material.client_ca);
    if (!cas.ok()) return cas.status();
  }
  return material;
}

TlsCredentials::TlsCredentials(TlsFiles files, TlsEventSink events, std::string dir)
    : files_(std::move(files)), events_(std::move(events)), dir_(std::move(dir)) {}

absl::StatusOr<std::unique_ptr<TlsCredentials>> TlsCredentials::Create(const TlsFiles& files,
                                                                       TlsEventSink events) {
  absl::StatusOr<TlsMaterial> material = CheckTlsFiles(files);
  if (!material.ok()) return material.status();
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/tensord-tls-XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create a private directory for the TLS "
                     "files (",
                     pattern, "): ", std::strerror(errno)));
  }
  std::unique_ptr<TlsCredentials> credentials(
      new TlsCredentials(files, std::move(events), pattern));
  if (absl::Status installed = credentials->Install(*material); !installed.ok()) {
    return installed;
  }
  credentials->current_ = *std::move(material);
  const std::string identity = ReadableFile(credentials->dir_, kIdentityName);
  if (files.client_ca_file.empty()) {
    credentials->provider_ = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        identity, identity, kRefreshSeconds);
  } else {
    credentials->provider_ = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        identity, identity, ReadableFile(credentials->dir_, kCaName), kRefreshSeconds);
  }
  return credentials;
}

TlsCredentials::~TlsCredentials() {
  provider_.reset();
  std::remove(ReadableFile(dir_, kIdentityName).c_str());
  std::remove(ReadableFile(dir_, kCaName).c_str());
  ::rmdir(dir_.c_str());
}

absl::Status TlsCredentials::Install(const TlsMaterial& material) {
  // One file holds the chain and then the key: gRPC reads the key and the chain
  // from the same path, so they always come from the same version.
  std::string identity = material.cert_chain;
  if (!identity.empty() && identity.back() != '\n') identity.push_back('\n');
  identity += material.private_key;
  if (!files_.client_ca_file.empty()) {
    if (absl::Status ca = WriteAtomically(dir_, kCaName, material.client_ca); !ca.ok()) return ca;
  }
  return WriteAtomically(dir_, kIdentityName, identity);
}

std::shared_ptr<grpc::ServerCredentials> TlsCredentials::ServerCredentials() const {
  grpc::experimental::TlsServerCredentialsOptions options(provider_);
  options.watch_identity_key_cert_pairs();
  if (files_.client_ca_file.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

void TlsCredentials::Reload() {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<TlsMaterial> material = CheckTlsFiles(files_);
  if (material.ok() && material->cert_chain == current_.cert_chain &&
      material->private_key == current_.private_key && material->client_ca == current_.client_ca) {
    last_rejected_.clear();
    return;
  }
  if (!material.ok()) {
    // Once per bad version, not every second.
    const std::string message(material.status().message());
    if (message != last_rejected_) {
      last_rejected_ = message;
      events_("tls_reload_failed",
              absl::StrCat(message, "; still serving the previous certificate"));
    }
    return;
  }
  if (absl::Status installed = Install(*material); !installed.ok()) {
    events_("tls_reload_failed", installed.message());
    return;
  }
  current_ = *std::move(material);
  last_rejected_.clear();
  events_("tls_reloaded",
          absl::StrCat("new certificate from ", files_.cert_file,
                       files_.client_ca_file.empty()
                           ? ""
                           : absl::StrCat(" and client CA from ", files_.client_ca_file)));
  for (const ReloadListener& listener : listeners_) {
    if (absl::Status taken = listener(current_); !taken.ok()) {
      events_("tls_reload_failed", taken.message());
    }
  }
}

TlsMaterial TlsCredentials::CurrentMaterial() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

void TlsCredentials::AddReloadListener(ReloadListener listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.push_back(std::move(listener));
}

}  // namespace tensorop::server
