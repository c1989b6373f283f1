#include "transport/auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
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

absl::StatusOr<Secret> Secret::ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrFormat("secret file %s: %s", path, std::strerror(errno)));
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
        absl::StrFormat("secret file %s: not a regular file", path));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "secret file %s: readable by others (mode %04o); chmod 600 %s", path,
        st.st_mode & 07777, path));
  }
  if (n < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "secret file %s: cannot read: %s", path, std::strerror(errno)));
  }
  text.resize(n);
  const std::vector<std::string> fields = absl::StrSplit(
      absl::StripAsciiWhitespace(text), ' ', absl::SkipWhitespace());
  std::string bytes;
  if (fields.size() != 3 || fields[0] != kFileTag ||
      (fields[1] != "admin" && fields[1] != "job") ||
      fields[2].size() != 2 * sizeof(Digest) ||
      !absl::c_all_of(fields[2], absl::ascii_isxdigit)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "secret file %s, line 1: not a dmg secret (expected '%s admin|job "
        "<64 hex digits>'; `dmg secret --output=FILE` writes one)",
        path, kFileTag));
  }
  bytes = absl::HexStringToBytes(fields[2]);
  Digest key;
  std::memcpy(key.data(), bytes.data(), key.size());
  OPENSSL_cleanse(bytes.data(), bytes.size());
  OPENSSL_cleanse(text.data(), text.size());
  return Secret(key, fields[1] == "admin");
}

absl::Status Secret::WriteFile(const std::string& path) const {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cannot create %s: %s%s", path, std::strerror(errno),
        errno == EEXIST ? " (a secret is never overwritten: remove it first)"
                        : ""));
  }
  std::string text = absl::StrFormat(
      "%s %s %s\n", kFileTag, admin_ ? "admin" : "job",
      absl::BytesToHexString(absl::string_view(
          reinterpret_cast<const char*>(bytes_.data()), bytes_.size())));
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

bool SameDigest(const Digest& a, const Digest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace dmg::transport
