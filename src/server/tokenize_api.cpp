#include "server/tokenize_api.h"

#include <fmt/core.h>

namespace strata::server {
namespace {

using nlohmann::json;

// Strict UTF-8: shortest forms, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    // Lead bytes: C0/C1 only start overlong forms, F5 and up only code points past U+10FFFF.
    const size_t n = b < 0x80 ? 1 : b < 0xC2 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF5 ? 4 : 0;
    if (n == 0) return false;
    uint32_t cpt = n == 1 ? b : b & (0x7F >> n);
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto c = static_cast<uint8_t>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cpt = (cpt << 6) | (c & 0x3F);
    }
    if ((n == 3 && cpt < 0x800) || (n == 4 && (cpt < 0x10000 || cpt > 0x10FFFF)) || (cpt >= 0xD800 && cpt <= 0xDFFF)) {
      return false;
    }
    i += n;
  }
  return true;
}

json piece_json(const std::string& piece) {
  if (valid_utf8(piece)) return piece;
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(c);
  return bytes;
}

// The body as a JSON object, within the size and nesting limits.
std::optional<ApiError> parse_object(const std::string& body, json& j) {
  if (body.size() > kMaxTokenizeBodyBytes) {
    ApiError e = bad_field("", fmt::format("the body has {} bytes, more than {}", body.size(), kMaxTokenizeBodyBytes));
    e.status = 413;
    return e;
  }
  if (json_nesting_depth(body) > kMaxJsonDepth)
    return bad_field("", fmt::format("the body nests deeper than {}", kMaxJsonDepth));
  j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return bad_field("", "the body is not valid JSON");
  if (!j.is_object()) return bad_field("", "the body must be a JSON object");
  return std::nullopt;
}

std::optional<ApiError> check_id(const text::Vocab& vocab, const json& t, const std::string& where, text::Token& id) {
  if (!t.is_number_integer()) return bad_field(where.substr(0, where.find('[')), where + " is not an integer token id");
  const int64_t v = t.get<int64_t>();
  if (v < 0 || v >= vocab.n_tokens()) {
    return bad_field(where.substr(0, where.find('[')),
               fmt::format("{} = {} is out of range: the vocabulary has {} tokens (0 to {})", where, v,
                           vocab.n_tokens(), vocab.n_tokens() - 1));
  }
  id = static_cast<text::Token>(v);
  return std::nullopt;
}

// `content` as a string, or llama-server's mixed array of strings and token ids (add_special applies
// to the first element only).
std::optional<ApiError> content_tokens(const text::Vocab& vocab, const json& content, bool add_special,
                                       bool parse_special, std::vector<text::Token>& ids) {
  if (content.is_string()) {
    ids = vocab.tokenize(content.get<std::string>(), add_special, parse_special);
    return std::nullopt;
  }
  if (!content.is_array()) return bad_field("content", "'content' must be a string or an array of strings and token ids");
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    if (part.is_string()) {
      const auto more = vocab.tokenize(part.get<std::string>(), add_special && i == 0, parse_special);
      ids.insert(ids.end(), more.begin(), more.end());
      continue;
    }
    text::Token id = 0;
    if (auto e = check_id(vocab, part, fmt::format("content[{}]", i), id)) return e;
    ids.push_back(id);
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> tokenize_request(const text::Vocab& vocab, const std::string& body, std::string& out) {
  json j;
  if (auto e = parse_object(body, j)) return e;
  bool add_special = false, parse_special = true, with_pieces = false;
  if (auto e = read_bool(j, "add_special", add_special)) return e;
  if (auto e = read_bool(j, "parse_special", parse_special)) return e;
  if (auto e = read_bool(j, "with_pieces", with_pieces)) return e;
  std::vector<text::Token> ids;
  if (const json* content = optional_field(j, "content")) {
    if (auto e = content_tokens(vocab, *content, add_special, parse_special, ids)) return e;
  }
  if (with_pieces && ids.size() > kMaxTokenizePieces) {
    return bad_field("with_pieces", fmt::format("'with_pieces' is for at most {} tokens; this content has {}",
                                          kMaxTokenizePieces, ids.size()));
  }
  // Written as text, not as a JSON value per token: a million tokens are one string, not a million
  // small allocations the allocator keeps afterwards.
  out = "{\"tokens\":[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    if (with_pieces) {
      out += fmt::format("{{\"id\":{},\"piece\":{}}}", ids[i],
                         piece_json(vocab.token_to_piece(ids[i], true)).dump(-1, ' ', false, json::error_handler_t::replace));
    } else {
      out += std::to_string(ids[i]);
    }
  }
  out += "]}";
  return std::nullopt;
}

std::optional<ApiError> detokenize_request(const text::Vocab& vocab, const std::string& body, std::string& out) {
  json j;
  if (auto e = parse_object(body, j)) return e;
  std::vector<text::Token> ids;
  if (const json* given = optional_field(j, "tokens")) {
    const json& tokens = *given;
    if (!tokens.is_array()) return bad_field("tokens", "'tokens' must be an array of token ids");
    ids.reserve(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      text::Token id = 0;
      if (auto e = check_id(vocab, tokens[i], fmt::format("tokens[{}]", i), id)) return e;
      ids.push_back(id);
    }
  }
  // llama-server renders special tokens' text and keeps them (common_detokenize(..., special = true)).
  out = json{{"content", vocab.detokenize(ids, false, true)}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return std::nullopt;
}

void add_tokenize_routes(httplib::Server& http, TokenizeHooks hooks) {
  auto route = [hooks](auto handle) {
    return [hooks, handle](const httplib::Request& req, httplib::Response& res) {
      if (!hooks.authorized(req, res)) return;
      const text::Vocab* vocab = hooks.vocab(res);
      if (!vocab) return;
      std::string out;
      const std::optional<ApiError> e = handle(*vocab, req.body, out);
      res.status = e ? e->status : 200;
      res.set_content(e ? e->body().dump(-1, ' ', false, json::error_handler_t::replace) : std::move(out), "application/json");
    };
  };
  http.Post("/tokenize", route(tokenize_request));
  http.Post("/detokenize", route(detokenize_request));
}

}  // namespace strata::server
