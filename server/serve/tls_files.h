// Checks of the PEM files `kvserve serve` is given for TLS, before gRPC sees them: gRPC only
// says "cannot listen" for a key that does not match its certificate or a file that is not
// PEM. OpenSSL (which gRPC links on Debian) parses them here so the error names the flag.
#pragma once
#include <string>

#include "absl/status/status.h"

namespace kvserve {

// OK when cert_pem holds a certificate and key_pem the private key that matches it;
// otherwise INVALID_ARGUMENT naming --tls-cert or --tls-key.
absl::Status CheckTlsKeyPair(const std::string& cert_pem, const std::string& key_pem);

// OK when ca_pem holds at least one certificate; INVALID_ARGUMENT naming --tls-client-ca.
absl::Status CheckTlsCa(const std::string& ca_pem);

}  // namespace kvserve
