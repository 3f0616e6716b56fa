// Jinja lexer: splits template source into text and the tokens inside {{ }} / {% %} tags, dropping
// {# #} comments and applying whitespace control ({%- -%} {{- -}} {#- -#}, trim_blocks, lstrip_blocks)
// and Jinja's newline rules (\r\n and \r read as \n, one trailing newline removed).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace strata::jinja {

struct SyntaxOptions {
  // HF transformers renders chat templates with trim_blocks=True and lstrip_blocks=True.
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

enum class Tok : uint8_t {
  Text,        // literal template text (text holds it)
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,        // identifier or keyword
  String,      // string literal, escapes decoded
  Int,
  Float,
  Op,  // operator or punctuation (text holds it)
  Eof,
};

struct Token {
  Tok kind = Tok::Eof;
  std::string text;
  int64_t ival = 0;
  double fval = 0;
  int line = 1;
  int col = 1;
};

const char* token_kind_name(Tok kind);
// How a token is shown in an error message: 'endfor', '}}', string literal, end of template.
std::string describe_token(const Token& t);

Result<std::vector<Token>> lex(std::string_view source, const SyntaxOptions& options);

}  // namespace strata::jinja
