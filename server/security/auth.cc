#include "server/security/auth.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <utility>

#include <grpc/grpc_security_constants.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/telemetry/request_log.h"

namespace tensorop::server {
namespace {

constexpr absl::string_view kHealthPrefix = "/grpc.health.v1.Health/";
constexpr absl::string_view kReflectionPrefixes[] = {"/grpc.reflection.v1alpha.ServerReflection/",
                                                     "/grpc.reflection.v1.ServerReflection/"};
constexpr absl::string_view kBearer = "Bearer ";

std::array<unsigned char, 32> Sha256(absl::string_view text) {
  std::array<unsigned char, 32> digest;
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
  return digest;
}

bool ValidName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' &&
        c != '@') {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth_token_file=", path, ": cannot read the file: ", std::strerror(errno)));
  }
  std::string text;
  char buffer[4096];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, got);
  std::fclose(file);
  return text;
}

grpc::string_ref Lookup(const grpc::AuthMetadataProcessor::InputMetadata& metadata,
                        absl::string_view key, bool* found) {
  auto it = metadata.find(grpc::string_ref(key.data(), key.size()));
  *found = it != metadata.end();
  return *found ? it->second : grpc::string_ref();
}

}  // namespace

std::optional<ReflectionAccess> ParseReflectionAccess(absl::string_view text) {
  if (text == "on") return ReflectionAccess::kOn;
  if (text == "off") return ReflectionAccess::kOff;
  if (text == "auth") return ReflectionAccess::kAuth;
  return std::nullopt;
}

absl::StatusOr<std::vector<AcceptedToken>> ParseTokenFile(absl::string_view path,
                                                          absl::string_view text) {
  std::vector<AcceptedToken> tokens;
  std::set<std::string> names;
  int number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++number;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    const std::string where = absl::StrCat("--auth_token_file=", path, ":", number, ": ");
    std::string name = absl::StrCat("line-", number);
    absl::string_view token = line;
    if (size_t colon = line.find(':'); colon != absl::string_view::npos) {
      name = std::string(absl::StripAsciiWhitespace(line.substr(0, colon)));
      token = absl::StripAsciiWhitespace(line.substr(colon + 1));
      if (!ValidName(name)) {
        // The name only: the part after it may be a secret.
        return absl::InvalidArgumentError(absl::StrCat(
            where, "a token's name (before the first ':') must be letters, digits and ._-@"));
      }
    }
    if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(where, "the token is empty"));
    for (char c : token) {
      if (absl::ascii_isspace(static_cast<unsigned char>(c)) ||
          !absl::ascii_isprint(static_cast<unsigned char>(c))) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "a token is printable ASCII without spaces"));
      }
    }
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "the name \"", name, "\" is used twice"));
    }
    tokens.push_back({name, Sha256(token)});
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--auth_token_file=", path, ": no tokens in the file (it would refuse every call)"));
  }
  return tokens;
}

absl::StatusOr<std::unique_ptr<TokenStore>> TokenStore::Load(const std::string& path,
                                                             EventSink events) {
  absl::StatusOr<std::string> text = ReadTokenFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<AcceptedToken>> tokens = ParseTokenFile(path, *text);
  if (!tokens.ok()) return tokens.status();
  std::unique_ptr<TokenStore> store(new TokenStore(path, std::move(events)));
  store->text_ = *std::move(text);
  store->tokens_ = *std::move(tokens);
  return store;
}

std::optional<std::string> TokenStore::Check(absl::string_view token) const {
  const std::array<unsigned char, 32> digest = Sha256(token);
  std::lock_guard<std::mutex> lock(mu_);
  // Every token is compared, so the time does not say which one matched.
  const AcceptedToken* match = nullptr;
  for (const AcceptedToken& accepted : tokens_) {
    if (CRYPTO_memcmp(accepted.digest.data(), digest.data(), digest.size()) == 0) {
      match = &accepted;
    }
  }
  if (match == nullptr) return std::nullopt;
  return match->name;
}

void TokenStore::Reload() {
  absl::StatusOr<std::string> text = ReadTokenFile(path_);
  std::lock_guard<std::mutex> lock(mu_);
  if (text.ok() && *text == text_) return;
  absl::StatusOr<std::vector<AcceptedToken>> tokens =
      text.ok() ? ParseTokenFile(path_, *text) : text.status();
  if (!tokens.ok()) {
    if (!text.ok() || *text != text_) {
      events_("auth_tokens_reload_failed",
              absl::StrCat(tokens.status().message(), "; still accepting the previous tokens"));
    }
    // Remember the bad version so it is reported once, not every second.
    if (text.ok()) text_ = *text;
    return;
  }
  text_ = *std::move(text);
  tokens_ = *std::move(tokens);
  events_("auth_tokens_reloaded", absl::StrCat(tokens_.size(), " tokens from ", path_));
}

namespace {

// The method of `path` ("/package.Service/Method") as a log line names it:
// its last part, kept for the life of the process. Paths come from clients,
// so at most kMaxMethodNames distinct ones are kept (the rest are "(other)")
// and each is cut.
absl::string_view MethodOf(absl::string_view path) {
  constexpr size_t kMaxMethodNames = 64;
  static std::mutex mutex;
  static std::set<std::string, std::less<>>* names = new std::set<std::string, std::less<>>();
  const absl::string_view method = path.substr(path.rfind('/') + 1).substr(0, 64);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto found = names->find(method); found != names->end()) return *found;
  if (names->size() >= kMaxMethodNames) return "(other)";
  return *names->emplace(method).first;
}

}  // namespace

grpc::Status TokenAuthProcessor::Refused(absl::string_view path, const grpc::AuthContext* context,
                                         const std::string& message) const {
  // A call refused here never reaches a handler: its line is written here.
  CallRecord record;
  record.method = MethodOf(path);
  for (const grpc::string_ref& subject :
       context->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME)) {
    record.identity = CallerIdentity("", absl::string_view(subject.data(), subject.size()));
  }
  LogCall(record, absl::UnauthenticatedError(message));
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, message);
}

grpc::Status TokenAuthProcessor::Process(const InputMetadata& auth_metadata,
                                         grpc::AuthContext* context,
                                         OutputMetadata* consumed_auth_metadata,
                                         OutputMetadata* /*response_metadata*/) {
  bool has_path = false;
  const grpc::string_ref path_ref = Lookup(auth_metadata, ":path", &has_path);
  const absl::string_view path(path_ref.data(), path_ref.size());
  // Probes must work without credentials.
  if (absl::StartsWith(path, kHealthPrefix)) return grpc::Status::OK;
  if (reflection_ == ReflectionAccess::kOn) {
    for (absl::string_view prefix : kReflectionPrefixes) {
      if (absl::StartsWith(path, prefix)) return grpc::Status::OK;
    }
  }
  bool has_header = false;
  const grpc::string_ref header_ref = Lookup(auth_metadata, "authorization", &has_header);
  const absl::string_view header(header_ref.data(), header_ref.size());
  if (!has_header || !absl::StartsWith(header, kBearer)) {
    counters_->missing.fetch_add(1, std::memory_order_relaxed);
    return Refused(path, context,
                   "this server needs a bearer token: send the metadata "
                   "\"authorization: Bearer <token>\" (tensorctl --token_file, "
                   "TENSOROP_TOKEN_FILE)");
  }
  std::optional<std::string> name =
      tokens_->Check(absl::StripAsciiWhitespace(header.substr(kBearer.size())));
  if (!name.has_value()) {
    counters_->invalid.fetch_add(1, std::memory_order_relaxed);
    return Refused(path, context,
                   "the bearer token is not accepted by this server (not in its "
                   "--auth_token_file, or rotated out)");
  }
  // The handler and the log see who called, never the token.
  consumed_auth_metadata->insert({"authorization", std::string(header)});
  context->AddProperty(kTokenNameProperty, *name);
  return grpc::Status::OK;
}

std::string CallerIdentity(absl::string_view token_name, absl::string_view cert_subject) {
  std::string identity;
  if (!token_name.empty()) identity = absl::StrCat("token:", token_name);
  if (!cert_subject.empty()) {
    absl::StrAppend(&identity, identity.empty() ? "" : " ", "cert:", cert_subject);
  }
  return identity;
}

std::string PeerIdentity(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return "";
  absl::string_view token_name;
  for (const grpc::string_ref& name : auth->FindPropertyValues(kTokenNameProperty)) {
    token_name = absl::string_view(name.data(), name.size());
  }
  absl::string_view cert_subject;
  for (const grpc::string_ref& subject :
       auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME)) {
    cert_subject = absl::string_view(subject.data(), subject.size());
    break;
  }
  return CallerIdentity(token_name, cert_subject);
}

}  // namespace tensorop::server
