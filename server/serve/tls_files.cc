#include "server/serve/tls_files.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

namespace kvserve {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::unique_ptr<BIO, BioFree> Bio(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::unique_ptr<X509, X509Free> FirstCertificate(const std::string& pem) {
  auto bio = Bio(pem);
  return std::unique_ptr<X509, X509Free>(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

}  // namespace

absl::Status CheckTlsKeyPair(const std::string& cert_pem, const std::string& key_pem) {
  auto cert = FirstCertificate(cert_pem);
  if (!cert) return absl::InvalidArgumentError("--tls-cert holds no PEM certificate");
  auto bio = Bio(key_pem);
  std::unique_ptr<EVP_PKEY, KeyFree> key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) return absl::InvalidArgumentError("--tls-key holds no PEM private key (or one with a passphrase)");
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError("--tls-key does not match the certificate in --tls-cert");
  }
  return absl::OkStatus();
}

absl::Status CheckTlsCa(const std::string& ca_pem) {
  if (!FirstCertificate(ca_pem)) return absl::InvalidArgumentError("--tls-client-ca holds no PEM certificate");
  return absl::OkStatus();
}

}  // namespace kvserve
