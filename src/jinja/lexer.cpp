#include "jinja/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace strata::jinja {

const char* token_kind_name(Tok kind) {
  switch (kind) {
    case Tok::Text: return "text";
    case Tok::VarBegin: return "'{{'";
    case Tok::VarEnd: return "'}}'";
    case Tok::BlockBegin: return "'{%'";
    case Tok::BlockEnd: return "'%}'";
    case Tok::Name: return "name";
    case Tok::String: return "string literal";
    case Tok::Int: return "integer";
    case Tok::Float: return "number";
    case Tok::Op: return "operator";
    case Tok::Eof: return "end of template";
  }
  return "?";
}

std::string describe_token(const Token& t) {
  switch (t.kind) {
    case Tok::Name:
    case Tok::Op: return "'" + t.text + "'";
    case Tok::Int: return fmt::format("integer {}", t.ival);
    case Tok::Text: return "template text";
    default: return token_kind_name(t.kind);
  }
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident(char c) { return is_ident_start(c) || is_digit(c); }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | ((cp >> 18) & 0x07));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  Lexer(std::string_view source, const SyntaxOptions& options) : opt_(options) {
    // Jinja reads \r\n and \r as \n and, unless keep_trailing_newline, drops one final newline.
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!opt_.keep_trailing_newline && !src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Result<std::vector<Token>> run() {
    while (true) {
      const size_t tag = find_tag(pos_);
      size_t text_start = pos_;
      size_t text_end = tag == std::string::npos ? src_.size() : tag;
      if (strip_leading_) {
        while (text_start < text_end && is_space(src_[text_start])) ++text_start;
        strip_leading_ = false;
      }
      if (tag == std::string::npos) {
        emit_text(text_start, text_end);
        break;
      }
      const char kind = src_[tag + 1];
      const char mod = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      const bool has_mod = mod == '-' || (mod == '+' && kind != '{');
      if (mod == '-') {
        while (text_end > text_start && is_space(src_[text_end - 1])) --text_end;
      } else if (opt_.lstrip_blocks && kind != '{' && mod != '+') {
        size_t line_begin = text_end;
        while (line_begin > text_start && (src_[line_begin - 1] == ' ' || src_[line_begin - 1] == '\t')) --line_begin;
        const bool at_line_start = line_begin == 0 || src_[line_begin - 1] == '\n';
        if (at_line_start) text_end = line_begin;
      }
      emit_text(text_start, text_end);
      const size_t inner = tag + 2 + (has_mod ? 1 : 0);
      if (kind == '#') {
        STRATA_TRY(skip_comment(tag, inner));
      } else {
        STRATA_TRY(lex_tag(tag, inner, kind == '{'));
      }
    }
    Token eof;
    eof.kind = Tok::Eof;
    locate(src_.size(), eof);
    out_.push_back(std::move(eof));
    return std::move(out_);
  }

 private:
  size_t find_tag(size_t from) const {
    size_t p = from;
    while ((p = src_.find('{', p)) != std::string::npos) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) return p;
      ++p;
    }
    return std::string::npos;
  }

  void locate(size_t p, Token& t) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), p);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    t.line = static_cast<int>(line);
    t.col = static_cast<int>(p - line_starts_[line - 1] + 1);
  }

  Error error_at(size_t p, const std::string& message) const {
    Token t;
    locate(p, t);
    return make_error("line {}, column {}: {}", t.line, t.col, message);
  }

  void emit_text(size_t begin, size_t end) {
    if (end <= begin) return;
    Token t;
    t.kind = Tok::Text;
    t.text = src_.substr(begin, end - begin);
    locate(begin, t);
    out_.push_back(std::move(t));
  }

  void emit(Tok kind, size_t at, std::string text = {}) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    locate(at, t);
    out_.push_back(std::move(t));
  }

  // After a closing delimiter: '-' strips the following whitespace, '+' keeps it, otherwise
  // trim_blocks drops one newline after block tags and comments.
  void after_close(char right_mod, bool is_block_or_comment) {
    if (right_mod == '-') {
      strip_leading_ = true;
    } else if (right_mod != '+' && is_block_or_comment && opt_.trim_blocks && pos_ < src_.size() &&
               src_[pos_] == '\n') {
      ++pos_;
    }
  }

  Status skip_comment(size_t tag, size_t inner) {
    const size_t end = src_.find("#}", inner);
    if (end == std::string::npos) return error_at(tag, "unterminated comment: '{#' is never closed by '#}'");
    const char right = end > inner ? src_[end - 1] : '\0';
    pos_ = end + 2;
    after_close(right, true);
    return ok_status();
  }

  Status lex_tag(size_t tag, size_t inner, bool is_var) {
    const size_t first_token = out_.size();
    emit(is_var ? Tok::VarBegin : Tok::BlockBegin, tag);
    std::vector<char> brackets;
    size_t p = inner;
    const char* closer = is_var ? "}}" : "%}";
    while (true) {
      while (p < src_.size() && is_space(src_[p])) ++p;
      if (p >= src_.size()) {
        return error_at(tag,
                        fmt::format("unexpected end of template: this tag is never closed (expected '{}')", closer));
      }
      if (brackets.empty()) {
        char right = '\0';
        size_t len = 0;
        if ((src_[p] == '-' || src_[p] == '+') && src_.compare(p + 1, 2, closer) == 0) {
          right = src_[p];
          len = 3;
        } else if (src_.compare(p, 2, closer) == 0) {
          len = 2;
        }
        if (len) {
          emit(is_var ? Tok::VarEnd : Tok::BlockEnd, p);
          pos_ = p + len;
          after_close(right, !is_var);
          if (!is_var && out_.size() == first_token + 3 && out_[first_token + 1].kind == Tok::Name &&
              out_[first_token + 1].text == "raw") {
            out_.resize(first_token);
            return lex_raw(tag);
          }
          return ok_status();
        }
      }
      const char c = src_[p];
      if (is_ident_start(c)) {
        size_t e = p;
        while (e < src_.size() && is_ident(src_[e])) ++e;
        emit(Tok::Name, p, src_.substr(p, e - p));
        p = e;
      } else if (is_digit(c)) {
        STRATA_TRY(lex_number(p));
      } else if (c == '\'' || c == '"') {
        STRATA_TRY(lex_string(p));
      } else {
        static const char* kTwo[] = {"**", "//", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* two : kTwo) {
          if (src_.compare(p, 2, two) == 0) op = two;
        }
        if (op.empty()) {
          if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos) {
            return error_at(p, fmt::format("unexpected character '{}' inside a tag", c));
          }
          op = std::string(1, c);
          if (c == '(' || c == '[' || c == '{') {
            brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
          } else if (c == ')' || c == ']' || c == '}') {
            if (brackets.empty() || brackets.back() != c) {
              return error_at(p, brackets.empty() ? fmt::format("unexpected '{}'", c)
                                                  : fmt::format("unexpected '{}', expected '{}'", c, brackets.back()));
            }
            brackets.pop_back();
          }
        }
        emit(Tok::Op, p, op);
        p += op.size();
      }
    }
  }

  Status lex_number(size_t& p) {
    const size_t start = p;
    std::string digits;
    auto take_digits = [&] {
      while (p < src_.size() &&
             (is_digit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1])))) {
        if (src_[p] != '_') digits += src_[p];
        ++p;
      }
    };
    take_digits();
    bool is_float = false;
    if (p + 1 < src_.size() && src_[p] == '.' && is_digit(src_[p + 1])) {
      is_float = true;
      digits += '.';
      ++p;
      take_digits();
    }
    if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && is_digit(src_[q])) {
        is_float = true;
        digits += 'e';
        digits.append(src_, p + 1, q - p - 1);
        p = q;
        take_digits();
      }
    }
    Token t;
    locate(start, t);
    if (is_float) {
      t.kind = Tok::Float;
      t.fval = std::strtod(digits.c_str(), nullptr);
    } else {
      t.kind = Tok::Int;
      int64_t v = 0;
      for (char d : digits) {
        if (v > (std::numeric_limits<int64_t>::max() - (d - '0')) / 10) {
          return error_at(start, "integer literal too large");
        }
        v = v * 10 + (d - '0');
      }
      t.ival = v;
    }
    t.text = src_.substr(start, p - start);
    out_.push_back(std::move(t));
    return ok_status();
  }

  // Python string literal escapes (unknown escapes stay as written, like Python).
  Status lex_string(size_t& p) {
    const size_t start = p;
    const char quote = src_[p++];
    std::string value;
    while (true) {
      if (p >= src_.size()) return error_at(start, "unterminated string literal");
      const char c = src_[p];
      if (c == quote) {
        ++p;
        break;
      }
      if (c != '\\' || p + 1 >= src_.size()) {
        value += c;
        ++p;
        continue;
      }
      const char e = src_[p + 1];
      p += 2;
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case '\n': break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int k = 0; k < n; ++k) {
            const int h = p + k < src_.size() ? hex_value(src_[p + k]) : -1;
            if (h < 0) return error_at(p - 2, fmt::format("truncated \\{} escape in a string literal", e));
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          if (cp > 0x10FFFF) return error_at(p - 2, "escape names a code point above U+10FFFF");
          p += static_cast<size_t>(n);
          append_utf8(value, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++k) {
              cp = cp * 8 + (src_[p++] - '0');
            }
            append_utf8(value, cp);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    Token t;
    t.kind = Tok::String;
    t.text = std::move(value);
    locate(start, t);
    out_.push_back(std::move(t));
    return ok_status();
  }

  // {% raw %}...{% endraw %}: the content is text, tags inside it are not interpreted.
  Status lex_raw(size_t tag) {
    size_t search = pos_;
    while (true) {
      const size_t open = src_.find("{%", search);
      if (open == std::string::npos) return error_at(tag, "unterminated raw block: '{% raw %}' has no '{% endraw %}'");
      size_t q = open + 2;
      const char left = q < src_.size() ? src_[q] : '\0';
      if (left == '-' || left == '+') ++q;
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0 || (q + 6 < src_.size() && is_ident(src_[q + 6]))) {
        search = open + 2;
        continue;
      }
      q += 6;
      while (q < src_.size() && is_space(src_[q])) ++q;
      char right = '\0';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) right = src_[q++];
      if (src_.compare(q, 2, "%}") != 0) {
        search = open + 2;
        continue;
      }
      size_t text_start = pos_;
      size_t text_end = open;
      if (strip_leading_) {
        while (text_start < text_end && is_space(src_[text_start])) ++text_start;
        strip_leading_ = false;
      }
      if (left == '-') {
        while (text_end > text_start && is_space(src_[text_end - 1])) --text_end;
      }
      emit_text(text_start, text_end);
      pos_ = q + 2;
      after_close(right, true);
      return ok_status();
    }
  }

  const SyntaxOptions& opt_;
  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;
  size_t pos_ = 0;
  bool strip_leading_ = false;
};

}  // namespace

Result<std::vector<Token>> lex(std::string_view source, const SyntaxOptions& options) {
  Lexer lexer(source, options);
  return lexer.run();
}

}  // namespace strata::jinja
