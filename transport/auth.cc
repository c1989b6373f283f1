#include "transport/auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"

namespace dmg::transport {

const char* RoleName(Role role) {
  switch (role) {
    case Role::kJob:
      return "job";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

namespace {

constexpr char kJobKeyLabel[] = "dmg job key";

Digest Hmac(const Digest& key, std::string_view message) {
  Digest out;
  unsigned int length = 0;
  CHECK(HMAC(EVP_sha256(), key.data(), key.size(),
             reinterpret_cast<const unsigned char*>(message.data()),
             message.size(), out.data(), &length) != nullptr);
  CHECK_EQ(length, out.size());
  return out;
}

std::string ProofMessage(std::string_view label, const Nonce& first,
                         const Nonce& second, Role role, std::string_view job) {
  std::string m(label);
  m.append(reinterpret_cast<const char*>(first.data()), first.size());
  m.append(reinterpret_cast<const char*>(second.data()), second.size());
  m.push_back(static_cast<char>(role));
  m.append(job);
  return m;
}

}  // namespace

Secret::~Secret() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

absl::StatusOr<Secret> Secret::Generate() {
  Digest bytes;
  if (RAND_bytes(bytes.data(), bytes.size()) != 1) {
    return absl::InternalError("the system's random source failed");
  }
  return Secret(bytes, /*admin=*/true);
}

Secret Secret::JobOnly() const {
  if (!admin_) return *this;
  return Secret(Hmac(bytes_, kJobKeyLabel), /*admin=*/false);
}

absl::StatusOr<Digest> Secret::KeyFor(Role role) const {
  if (role == Role::kAdmin) {
    if (!admin_) {
      return absl::PermissionDeniedError(
          "this is a job-only key: loading a store or stopping a memory "
          "node needs the cluster secret (dmg secret writes one)");
    }
    return bytes_;
  }
  return admin_ ? Hmac(bytes_, kJobKeyLabel) : bytes_;
}

namespace {

// The whitespace-separated fields of a key file (`what`: "secret file",
// "job token file"). Refuses one that others may read (as ssh does with
// keys), or that is not a regular file.
absl::StatusOr<std::vector<std::string>> ReadKeyFields(const std::string& path,
                                                       const char* what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrFormat("%s %s: %s", what, path, std::strerror(errno)));
  }
  struct stat st;
  std::string text(256, '\0');
  ssize_t n = -1;
  const bool statted = ::fstat(fd, &st) == 0;
  if (statted && S_ISREG(st.st_mode) && (st.st_mode & 077) == 0) {
    n = ::read(fd, text.data(), text.size());
  }
  ::close(fd);
  if (!statted || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %s: not a regular file", what, path));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(
        absl::StrFormat("%s %s: readable by others (mode %04o); chmod 600 %s",
                        what, path, st.st_mode & 07777, path));
  }
  if (n < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s %s: cannot read: %s", what, path, std::strerror(errno)));
  }
  text.resize(n);
  std::vector<std::string> fields = absl::StrSplit(
      absl::StripAsciiWhitespace(text), ' ', absl::SkipWhitespace());
  OPENSSL_cleanse(text.data(), text.size());
  return fields;
}

// 64 hex digits into a key (false: not that).
bool KeyFromHex(std::string_view hex, Digest* key) {
  if (hex.size() != 2 * sizeof(Digest) ||
      !absl::c_all_of(hex, absl::ascii_isxdigit)) {
    return false;
  }
  std::string bytes =
      absl::HexStringToBytes(absl::string_view(hex.data(), hex.size()));
  std::memcpy(key->data(), bytes.data(), key->size());
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return true;
}

std::string KeyHex(const Digest& key) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(key.data()), key.size()));
}

// Writes `text` to a new private file (O_EXCL: never over another) and
// wipes it; the error is AlreadyExists when the path is taken.
absl::Status WriteKeyText(const std::string& path, std::string text,
                          const char* what) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int saved = errno;
    OPENSSL_cleanse(text.data(), text.size());
    const std::string message = absl::StrFormat(
        "cannot create %s: %s%s", path, std::strerror(saved),
        saved == EEXIST ? absl::StrFormat(" (a %s is never overwritten: "
                                          "remove it first)",
                                          what)
                        : "");
    return saved == EEXIST ? absl::AlreadyExistsError(message)
                           : absl::FailedPreconditionError(message);
  }
  const bool written = ::write(fd, text.data(), text.size()) ==
                           static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  const int saved = errno;
  OPENSSL_cleanse(text.data(), text.size());
  if (::close(fd) != 0 || !written) {
    ::unlink(path.c_str());
    return absl::InternalError(
        absl::StrFormat("writing %s: %s", path, std::strerror(saved)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Secret> Secret::ReadFile(const std::string& path) {
  absl::StatusOr<std::vector<std::string>> fields =
      ReadKeyFields(path, "secret file");
  if (!fields.ok()) return fields.status();
  const std::vector<std::string>& f = *fields;
  Digest key;
  if (f.size() != 3 || f[0] != kFileTag || (f[1] != "admin" && f[1] != "job") ||
      !KeyFromHex(f[2], &key)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "secret file %s, line 1: not a dmg secret (expected '%s admin|job "
        "<64 hex digits>'; `dmg secret --output=FILE` writes one)",
        path, kFileTag));
  }
  return Secret(key, f[1] == "admin");
}

absl::Status Secret::WriteFile(const std::string& path) const {
  absl::Status s =
      WriteKeyText(path,
                   absl::StrFormat("%s %s %s\n", kFileTag,
                                   admin_ ? "admin" : "job", KeyHex(bytes_)),
                   "secret");
  if (absl::IsAlreadyExists(s))
    return absl::FailedPreconditionError(s.message());
  return s;
}

JobToken::~JobToken() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

absl::StatusOr<JobToken> JobToken::Generate() {
  Digest bytes;
  if (RAND_bytes(bytes.data(), bytes.size()) != 1) {
    return absl::InternalError("the system's random source failed");
  }
  return JobToken(bytes);
}

absl::StatusOr<JobToken> JobToken::FromHex(std::string_view hex) {
  Digest bytes;
  const absl::string_view text =
      absl::StripAsciiWhitespace(absl::string_view(hex.data(), hex.size()));
  if (!KeyFromHex(std::string_view(text.data(), text.size()), &bytes)) {
    return absl::InvalidArgumentError(
        "a job token is 64 hex digits (as dmg run hands it to the job's "
        "other processes)");
  }
  return JobToken(bytes);
}

absl::StatusOr<JobToken> JobToken::ForThisProcess() {
  static const absl::StatusOr<JobToken>* const token = [] {
    const char* env = std::getenv(kEnvVar);
    if (env == nullptr || *env == '\0') {
      return new absl::StatusOr<JobToken>(Generate());
    }
    absl::StatusOr<JobToken> t = FromHex(env);
    if (!t.ok()) {
      return new absl::StatusOr<JobToken>(absl::InvalidArgumentError(
          absl::StrCat("$", kEnvVar, ": ", t.status().message())));
    }
    return new absl::StatusOr<JobToken>(std::move(t));
  }();
  return *token;
}

absl::StatusOr<JobToken> JobToken::ReadFile(const std::string& path) {
  absl::StatusOr<std::vector<std::string>> fields =
      ReadKeyFields(path, "job token file");
  if (!fields.ok()) return fields.status();
  Digest bytes;
  if (fields->size() != 2 || (*fields)[0] != kFileTag ||
      !KeyFromHex((*fields)[1], &bytes)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job token file %s, line 1: not a dmg job token (expected '%s <64 "
        "hex digits>', as dmg run writes it)",
        path, kFileTag));
  }
  return JobToken(bytes);
}

absl::Status JobToken::WriteFile(const std::string& path) const {
  return WriteKeyText(path, absl::StrFormat("%s %s\n", kFileTag, Hex()),
                      "job token");
}

std::string JobToken::Hex() const { return KeyHex(bytes_); }

Nonce NewNonce() {
  Nonce n;
  CHECK_EQ(RAND_bytes(n.data(), n.size()), 1) << "random source failed";
  return n;
}

Digest ClientProof(const Digest& key, const Nonce& server, const Nonce& client,
                   Role role, std::string_view job) {
  return Hmac(key, ProofMessage("dmg-client", server, client, role, job));
}

Digest ServerProof(const Digest& key, const Nonce& server, const Nonce& client,
                   Role role, std::string_view job) {
  return Hmac(key, ProofMessage("dmg-server", client, server, role, job));
}

Digest SealToken(const Digest& key, const Nonce& server, const Nonce& client,
                 std::string_view job, const Digest& token) {
  Digest pad =
      Hmac(key, ProofMessage("dmg-token", server, client, Role::kJob, job));
  for (size_t i = 0; i < pad.size(); ++i) pad[i] ^= token[i];
  return pad;
}

Digest TokenVerifier(const Digest& token, std::string_view job) {
  std::string message = "dmg job verifier";
  message.append(job);
  return Hmac(token, message);
}

bool SameDigest(const Digest& a, const Digest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace dmg::transport
