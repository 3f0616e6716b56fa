// How node links authenticate and encrypt: what the coordinator's options carry (no gRPC types here,
// so the runtime can hold it without seeing the transport).
#pragma once

#include <string>

#include "base/result.h"

namespace strata::net {

struct LinkSecurity {
  std::string token;     // shared secret; empty: none
  std::string tls_ca;    // PEM file of the CA that signs the peers' certificates; empty: plaintext
  std::string tls_cert;  // PEM certificate of this side (server; optional client cert for mutual TLS)
  std::string tls_key;
};

// Reads a token from a file (first line, trimmed); the error names the file.
Result<std::string> read_token_file(const std::string& path);

}  // namespace strata::net
