#include "net/credentials.h"

#include <openssl/crypto.h>

#include <fstream>
#include <sstream>

namespace strata::net {
namespace {

Result<std::string> read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read {} file '{}'", what, path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Result<std::string> read_token_file(const std::string& path) {
  STRATA_ASSIGN(std::string text, read_file(path, "token"));
  const auto end = text.find_first_of("\r\n");
  std::string token = text.substr(0, end);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.pop_back();
  if (token.empty()) return make_error("token file '{}' is empty", path);
  return token;
}

Result<std::shared_ptr<grpc::ServerCredentials>> server_credentials(const LinkSecurity& s) {
  if (s.tls_cert.empty() != s.tls_key.empty()) return make_error("--tls-cert and --tls-key go together");
  if (s.tls_cert.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      s.tls_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  STRATA_ASSIGN(std::string cert, read_file(s.tls_cert, "certificate"));
  STRATA_ASSIGN(std::string key, read_file(s.tls_key, "key"));
  options.pem_key_cert_pairs.push_back({key, cert});
  if (!s.tls_ca.empty()) {
    STRATA_ASSIGN(options.pem_root_certs, read_file(s.tls_ca, "CA"));
  }
  return grpc::SslServerCredentials(options);
}

Result<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials(const LinkSecurity& s) {
  if (s.tls_ca.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  STRATA_ASSIGN(options.pem_root_certs, read_file(s.tls_ca, "CA"));
  if (!s.tls_cert.empty()) {
    STRATA_ASSIGN(options.pem_cert_chain, read_file(s.tls_cert, "certificate"));
    STRATA_ASSIGN(options.pem_private_key, read_file(s.tls_key, "key"));
  }
  return grpc::SslCredentials(options);
}

Result<std::shared_ptr<grpc::Channel>> make_channel(const std::string& endpoint, const LinkSecurity& s) {
  STRATA_ASSIGN(auto creds, channel_credentials(s));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxReplyBytes);
  args.SetMaxSendMessageSize(kMaxRequestBytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  // Reconnect quickly once a restarted worker is back.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  return grpc::CreateCustomChannel(endpoint, creds, args);
}

void authorize(grpc::ClientContext& ctx, const std::string& token) {
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
}

grpc::Status check_token(const grpc::ServerContext& ctx, const std::string& token) {
  if (token.empty()) return grpc::Status::OK;
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  const std::string want = "Bearer " + token;
  if (it == md.end()) return {grpc::StatusCode::UNAUTHENTICATED, "missing token: this worker requires --token"};
  const std::string got(it->second.data(), it->second.size());
  if (got.size() != want.size() || CRYPTO_memcmp(got.data(), want.data(), want.size()) != 0) {
    return {grpc::StatusCode::UNAUTHENTICATED, "wrong token"};
  }
  return grpc::Status::OK;
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

}  // namespace strata::net
