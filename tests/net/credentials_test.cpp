// Link security options: token files, which TLS settings go together, loopback detection.
#include <gtest/gtest.h>

#include "net/credentials.h"
#include "net_test_util.h"

namespace strata::net {
namespace {

TEST(Credentials, token_file_gives_its_first_line_without_trailing_blanks) {
  testing::ScratchDir dir("token");
  auto a = read_token_file(dir.write("plain", "s3cret"));
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(*a, "s3cret");
  auto b = read_token_file(dir.write("crlf", "s3cret \t\r\nsecond line\n"));
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(*b, "s3cret");
  // Leading blanks are part of the token (only the end is trimmed).
  auto c = read_token_file(dir.write("lead", " tok\n"));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(*c, " tok");
}

TEST(Credentials, empty_or_missing_token_files_are_refused_by_name) {
  testing::ScratchDir dir("token_bad");
  for (const std::string& text : {std::string(), std::string("\n"), std::string("  \t\nsecond\n")}) {
    const std::string path = dir.write("empty", text);
    auto t = read_token_file(path);
    ASSERT_FALSE(t.ok()) << "accepted '" << text << "'";
    EXPECT_NE(t.error().message.find("token file '" + path + "' is empty"), std::string::npos) << t.error().message;
  }
  const std::string missing = (dir.path() / "nope").string();
  auto m = read_token_file(missing);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("cannot read token file '" + missing + "'"), std::string::npos) << m.error().message;
}

TEST(Credentials, without_tls_files_both_sides_are_plaintext) {
  auto server = server_credentials({"token", "", "", ""});
  ASSERT_TRUE(server.ok()) << server.error().message;
  EXPECT_NE(*server, nullptr);
  auto channel = channel_credentials({"token", "", "", ""});
  ASSERT_TRUE(channel.ok()) << channel.error().message;
  EXPECT_NE(*channel, nullptr);
  // A client certificate without a CA is not used: the channel stays plaintext, as before.
  EXPECT_TRUE(channel_credentials({"", "", "/no/such/cert.pem", "/no/such/key.pem"}).ok());
}

TEST(Credentials, server_certificate_and_key_go_together) {
  for (const LinkSecurity& s : {LinkSecurity{"", "", "cert.pem", ""}, LinkSecurity{"", "", "", "key.pem"},
                                LinkSecurity{"", "ca.pem", "", "key.pem"}}) {
    auto c = server_credentials(s);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().message, "--tls-cert and --tls-key go together");
  }
}

TEST(Credentials, unreadable_tls_files_are_named_with_their_role) {
  testing::ScratchDir dir("tls");
  const std::string cert = dir.write("cert.pem", "not really a certificate");
  const std::string missing = (dir.path() / "missing.pem").string();
  auto key = server_credentials({"", "", cert, missing});
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.error().message, "cannot read key file '" + missing + "'");
  auto ca = server_credentials({"", missing, cert, cert});
  ASSERT_FALSE(ca.ok());
  EXPECT_EQ(ca.error().message, "cannot read CA file '" + missing + "'");
  auto channel_ca = channel_credentials({"", missing, "", ""});
  ASSERT_FALSE(channel_ca.ok());
  EXPECT_EQ(channel_ca.error().message, "cannot read CA file '" + missing + "'");
  auto channel_cert = channel_credentials({"", cert, missing, cert});
  ASSERT_FALSE(channel_cert.ok());
  EXPECT_EQ(channel_cert.error().message, "cannot read certificate file '" + missing + "'");
  auto channel_key = channel_credentials({"", cert, cert, missing});
  ASSERT_FALSE(channel_key.ok());
  EXPECT_EQ(channel_key.error().message, "cannot read key file '" + missing + "'");
  // A channel over a bad endpoint still needs its credentials first.
  EXPECT_FALSE(make_channel("127.0.0.1:1", {"", missing, "", ""}).ok());
  EXPECT_TRUE(make_channel("127.0.0.1:1", {}).ok());
}

TEST(Credentials, loopback_hosts) {
  for (const char* host : {"localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]"}) {
    EXPECT_TRUE(is_loopback_host(host)) << host;
  }
  for (const char* host : {"", "0.0.0.0", "10.0.0.1", "128.0.0.1", "localhost.example.com", "::", "example.com"}) {
    EXPECT_FALSE(is_loopback_host(host)) << host;
  }
}

}  // namespace
}  // namespace strata::net
