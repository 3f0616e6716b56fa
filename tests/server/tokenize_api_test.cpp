// /tokenize and /detokenize against `strata tokenize` and the vocabulary, and their refusals.
#include "server/tokenize_api.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "gguf/gguf.h"
#include "server/serve_process.h"
#include "testing/process.h"
#include "testing/shared_data.h"
#include "text/vocab.h"

namespace strata {
namespace {

using nlohmann::json;

const char* kTexts[] = {"Once upon a time, there was a little girl named Lily.", "café 😀 日本 — «ok»", "<s> is BOS",
                        "  two  spaces\nand a newline"};

// `strata tokenize` for a text: the ids, and each token's raw bytes (its --pieces output).
std::vector<std::pair<int, std::string>> strata_tokenize(const std::string& model, const std::string& text,
                                                         const std::string& flags) {
  const auto r = testing::run_command(testing::shell_quote(testing::strata_binary()) + " tokenize --pieces -m " +
                                      testing::shell_quote(model) + " -p " + testing::shell_quote(text) + " " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Lines are "%7d '<piece>'\n"; a piece may itself contain a newline, so split on the id pattern.
  std::vector<std::pair<int, std::string>> out;
  size_t at = 0;
  while (at < r.out.size()) {
    const size_t quote = r.out.find('\'', at);
    if (quote == std::string::npos) break;
    const int id = std::stoi(r.out.substr(at, quote - at));
    size_t end = quote + 1;
    // The piece ends at "'\n" followed by the next id line (or the end).
    for (;;) {
      end = r.out.find("'\n", end);
      if (end == std::string::npos || end + 2 == r.out.size() || r.out[end + 2] == ' ' ||
          std::isdigit(static_cast<unsigned char>(r.out[end + 2]))) {
        break;
      }
      ++end;
    }
    if (end == std::string::npos) break;
    out.emplace_back(id, r.out.substr(quote + 1, end - quote - 1));
    at = end + 2;
  }
  return out;
}

bool valid_utf8_reference(const std::string& s) {
  // std::wstring_convert is deprecated; decode by hand (the strict rules of RFC 3629).
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t c = n == 1 ? b : b & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
      c = (c << 6) | (s[i + k] & 0x3F);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < kMin[n] || c > 0x10FFFF || (c >= 0xD800 && c < 0xE000)) return false;
    i += n;
  }
  return true;
}

json post(httplib::Client& c, const char* path, const json& body, int* status) {
  auto r = c.Post(path, {{"Authorization", "Bearer tok-key"}}, body.dump(), "application/json");
  *status = r ? r->status : -1;
  return r ? json::parse(r->body, nullptr, false) : json();
}

TEST(TokenizeApi, tokenize_gives_strata_tokenizes_ids_and_pieces_and_detokenize_inverts_it) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  testing::ServeProcess server({"-m", model, "-c", "256", "--api-key", "tok-key"}, "tokenize");
  ASSERT_TRUE(server.ok()) << server.log();
  auto c = server.client();
  int status = 0;
  for (const std::string text : kTexts) {
    for (const bool bos : {false, true}) {
      for (const bool special : {false, true}) {
        std::string flags = bos ? "" : "--no-bos";
        if (special) flags += " --parse-special";
        const auto want = strata_tokenize(model, text, flags);
        ASSERT_FALSE(want.empty()) << text;
        json j = post(c, "/tokenize", {{"content", text}, {"add_special", bos}, {"parse_special", special}}, &status);
        ASSERT_EQ(status, 200) << j;
        ASSERT_EQ(j["tokens"].size(), want.size()) << text << " " << flags << ": " << j;
        for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(j["tokens"][i], want[i].first) << text << " #" << i;
        j = post(c, "/tokenize",
                 {{"content", text}, {"add_special", bos}, {"parse_special", special}, {"with_pieces", true}}, &status);
        ASSERT_EQ(status, 200) << j;
        ASSERT_EQ(j["tokens"].size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          const json& t = j["tokens"][i];
          EXPECT_EQ(t["id"], want[i].first);
          const std::string& bytes = want[i].second;
          if (valid_utf8_reference(bytes)) {
            EXPECT_EQ(t["piece"], bytes) << text << " #" << i;
          } else {  // a byte-fallback token that is part of a character: its bytes as numbers
            json array = json::array();
            for (unsigned char b : bytes) array.push_back(b);
            EXPECT_EQ(t["piece"], array) << text << " #" << i;
          }
        }
      }
    }
    // Without BOS, and with special-token text left as text, the ids decode back to the text.
    json ids = post(c, "/tokenize", {{"content", text}, {"parse_special", false}}, &status)["tokens"];
    json back = post(c, "/detokenize", {{"tokens", ids}}, &status);
    ASSERT_EQ(status, 200) << back;
    EXPECT_EQ(back["content"], text);
  }
  // The ids `strata tokenize` has printed since its first test (tests/cli), BOS first.
  json lily = post(c, "/tokenize", {{"content", kTexts[0]}, {"add_special", true}}, &status);
  EXPECT_EQ(lily["tokens"], json({1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426}));
  // The four byte tokens of U+1F600 (<0xF0> <0x9F> <0x98> <0x80> are ids 3 + byte) make the emoji.
  json emoji = post(c, "/detokenize", {{"tokens", {3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80}}}, &status);
  EXPECT_EQ(emoji["content"], "\xF0\x9F\x98\x80");
  EXPECT_EQ(post(c, "/detokenize", json::object(), &status)["content"], "");
  EXPECT_EQ(post(c, "/tokenize", json::object(), &status)["tokens"], json::array());
}

TEST(TokenizeApi, endpoints_need_the_api_key_like_the_others) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  testing::ServeProcess server({"-m", model, "-c", "256", "--api-key", "tok-key"}, "tokenize-auth");
  ASSERT_TRUE(server.ok()) << server.log();
  auto c = server.client();
  for (const char* path : {"/tokenize", "/detokenize"}) {
    auto r = c.Post(path, R"({"content":"hi","tokens":[1]})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
    r = c.Post(path, {{"Authorization", "Bearer wrong"}}, R"({"content":"hi","tokens":[1]})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
  }
}

class TokenizeRequests : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = testing::shared_file("models/stories260K.gguf");
    ASSERT_FALSE(path.empty());
    auto file = gguf::File::open(path);
    ASSERT_TRUE(file.ok());
    auto vocab = text::Vocab::load(**file);
    ASSERT_TRUE(vocab.ok());
    vocab_ = *vocab;
  }
  // The error for a /tokenize (tokenize = true) or /detokenize body; "" when it is accepted.
  std::string error(bool tokenize, const std::string& body, int* status = nullptr) {
    std::string out;
    auto e = tokenize ? server::tokenize_request(*vocab_, body, out) : server::detokenize_request(*vocab_, body, out);
    if (status) *status = e ? e->status : 200;
    return e ? e->param + ": " + e->message : "";
  }
  std::shared_ptr<const text::Vocab> vocab_;
};

// llama-server's mixed content: strings tokenized in place, ids kept, BOS only before the first part.
TEST_F(TokenizeRequests, mixed_content_joins_strings_and_ids_in_order) {
  std::string text;
  ASSERT_FALSE(
      server::tokenize_request(*vocab_, R"({"content":["Once upon", 42, " a time"],"add_special":true})", text));
  const json out = json::parse(text);
  std::vector<text::Token> want = vocab_->tokenize("Once upon", true, true);
  want.push_back(42);
  for (text::Token t : vocab_->tokenize(" a time", false, true)) want.push_back(t);
  EXPECT_EQ(out["tokens"].get<std::vector<text::Token>>(), want);
  ASSERT_EQ(want.front(), vocab_->bos());
  EXPECT_EQ(std::count(want.begin(), want.end(), vocab_->bos()), 1);
}

TEST_F(TokenizeRequests, bad_ids_types_and_bodies_are_refused_naming_the_field) {
  ASSERT_EQ(vocab_->n_tokens(), 512);
  EXPECT_EQ(error(false, R"({"tokens":[0,511]})"), "");
  EXPECT_NE(error(false, R"({"tokens":[1,512]})").find("tokens[1] = 512 is out of range"), std::string::npos);
  EXPECT_NE(error(false, R"({"tokens":[-1]})").find("tokens[0] = -1 is out of range"), std::string::npos);
  EXPECT_NE(error(false, R"({"tokens":[1e30]})").find("tokens[0] is not an integer"), std::string::npos);
  EXPECT_NE(error(false, R"({"tokens":[1.5]})").find("tokens[0] is not an integer"), std::string::npos);
  EXPECT_NE(error(false, R"({"tokens":["a"]})").find("tokens[0] is not an integer"), std::string::npos);
  EXPECT_NE(error(false, R"({"tokens":99999999999999999999})").find("tokens: "), std::string::npos);
  EXPECT_NE(error(false, R"({"tokens":{"a":1}})").find("must be an array"), std::string::npos);
  EXPECT_NE(error(true, R"({"content":5})").find("content: 'content' must be a string"), std::string::npos);
  EXPECT_NE(error(true, R"({"content":["a", 600]})").find("content[1] = 600 is out of range"), std::string::npos);
  EXPECT_NE(error(true, R"({"content":["a", {}]})").find("content[1] is not an integer"), std::string::npos);
  EXPECT_NE(error(true, R"({"content":"a","add_special":"yes"})").find("add_special"), std::string::npos);
  EXPECT_NE(error(true, R"({"content":"a","with_pieces":1})").find("with_pieces"), std::string::npos);
  EXPECT_NE(error(true, R"({"content":"a","parse_special":[]})").find("parse_special"), std::string::npos);
  for (const bool t : {true, false}) {
    EXPECT_NE(error(t, "not json").find("not valid JSON"), std::string::npos);
    EXPECT_NE(error(t, "[1,2]").find("must be a JSON object"), std::string::npos);
    EXPECT_NE(error(t, std::string(100000, '[') + std::string(100000, ']')).find("deeper"), std::string::npos);
    int status = 0;
    const std::string big = R"({"content":")" + std::string(server::kMaxTokenizeBodyBytes, 'a') + "\"}";
    EXPECT_NE(error(t, big, &status).find("more than"), std::string::npos);
    EXPECT_EQ(status, 413);
  }
  // Review finding: 1 MB of content with pieces built a JSON object per token (~650 MB the server
  // kept). Pieces are for at most kMaxTokenizePieces tokens; ids alone are written as text.
  const std::string mb = R"({"content":")" + std::string(1 << 20, 'x') + R"(","with_pieces":true})";
  int status = 0;
  EXPECT_NE(error(true, mb, &status).find("with_pieces: 'with_pieces' is for at most"), std::string::npos);
  EXPECT_EQ(status, 400);
  std::string ids;
  ASSERT_FALSE(server::tokenize_request(*vocab_, R"({"content":")" + std::string(1 << 20, 'x') + "\"}", ids));
  EXPECT_GE(json::parse(ids)["tokens"].size(), 1000u);
}

}  // namespace
}  // namespace strata
