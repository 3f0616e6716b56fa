// llama-server's /tokenize and /detokenize, with its field names:
//   POST /tokenize   {content, add_special = false, parse_special = true, with_pieces = false}; content
//                    is a string or an array of strings and token ids (add_special on the first only)
//                    -> {tokens: [id, ...]}, or with_pieces: {tokens: [{id, piece}, ...]} where a piece
//                       is a string when it is valid UTF-8 on its own, else the array of its bytes
//   POST /detokenize {tokens: [id, ...]} -> {content}
#pragma once

#include <httplib.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/request_fields.h"
#include "text/vocab.h"

namespace strata::server {

inline constexpr size_t kMaxTokenizeBodyBytes = size_t{4} << 20;
// with_pieces answers carry an object per token: at most a 256k context's worth.
inline constexpr size_t kMaxTokenizePieces = size_t{1} << 18;

// The response body (JSON text) for a /tokenize or /detokenize request body, or the error naming the field.
std::optional<ApiError> tokenize_request(const text::Vocab& vocab, const std::string& body, std::string& out);
std::optional<ApiError> detokenize_request(const text::Vocab& vocab, const std::string& body, std::string& out);

// What the routes need from the server: its authorization (false: it has answered 401) and the
// loaded model's vocabulary (nullptr: it has answered 503 while loading).
struct TokenizeHooks {
  std::function<bool(const httplib::Request&, httplib::Response&)> authorized;
  std::function<const text::Vocab*(httplib::Response&)> vocab;
};

// Registers POST /tokenize and POST /detokenize.
void add_tokenize_routes(httplib::Server& http, TokenizeHooks hooks);

}  // namespace strata::server
