#include "chat/json_scan.h"

#include <cstring>

namespace strata::chat {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

std::string JsonScanner::closers() const {
  std::string s;
  for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) s += *it == '{' ? '}' : ']';
  return s;
}

void JsonScanner::mark_release(bool in_string) {
  release_size_ = fed_;
  release_closers_ = (in_string ? "\"" : "") + closers();
}

JsonScanner::Step JsonScanner::after_value() {
  if (stack_.empty()) {
    state_ = State::kDone;
    mark_release(false);
    return Step::kDone;
  }
  state_ = State::kAfterValue;
  mark_release(false);
  return Step::kMore;
}

JsonScanner::Step JsonScanner::value_start(char c) {
  switch (c) {
    case '{':
    case '[':
      if (stack_.size() >= kMaxDepth) return Step::kError;
      stack_.push_back(c);
      state_ = c == '{' ? State::kKeyOrClose : State::kValueOrClose;
      mark_release(false);
      return Step::kMore;
    case '"':
      state_ = State::kString;
      string_is_key_ = false;
      mark_release(true);
      return Step::kMore;
    case 't': literal_rest_ = "rue"; state_ = State::kLiteral; return Step::kMore;
    case 'f': literal_rest_ = "alse"; state_ = State::kLiteral; return Step::kMore;
    case 'n': literal_rest_ = "ull"; state_ = State::kLiteral; return Step::kMore;
    case '-': num_ = Num::kMinus; state_ = State::kNumber; return Step::kMore;
    default:
      if (!is_digit(c)) return Step::kError;
      num_ = c == '0' ? Num::kZero : Num::kInt;
      state_ = State::kNumber;
      return Step::kMore;
  }
}

JsonScanner::Step JsonScanner::feed_string(char c) {
  auto u = static_cast<unsigned char>(c);
  if (state_ == State::kEscape) {
    if (c == 'u') {
      state_ = State::kUnicode;
      unicode_left_ = 4;
      return Step::kMore;
    }
    if (!std::strchr("\"\\/bfnrt", c) || c == '\0') return Step::kError;
    state_ = State::kString;
  } else if (state_ == State::kUnicode) {
    if (!is_hex(c)) return Step::kError;
    if (--unicode_left_ == 0) state_ = State::kString;
  } else if (utf8_left_ > 0) {
    if ((u & 0xC0) != 0x80) return Step::kError;
    --utf8_left_;
  } else if (c == '"') {
    if (string_is_key_) {
      state_ = State::kColon;
      return Step::kMore;
    }
    return after_value();
  } else if (c == '\\') {
    state_ = State::kEscape;
    return Step::kMore;
  } else if (u < 0x20) {
    return Step::kError;
  } else if (u >= 0x80) {
    if (u >= 0xF8 || (u & 0xC0) == 0x80) return Step::kError;
    utf8_left_ = u >= 0xF0 ? 3 : u >= 0xE0 ? 2 : 1;
    return Step::kMore;
  }
  // A whole character (or escape) of a value string ends here: the text can be closed with a quote.
  if (state_ == State::kString && utf8_left_ == 0 && !string_is_key_) mark_release(true);
  return Step::kMore;
}

JsonScanner::Step JsonScanner::feed_number(char c) {
  auto next = [&](Num n) {
    num_ = n;
    ++fed_;
    return Step::kMore;
  };
  switch (num_) {
    case Num::kMinus:
      if (c == '0') return next(Num::kZero);
      if (is_digit(c)) return next(Num::kInt);
      return Step::kError;
    case Num::kZero:
    case Num::kInt:
      if (is_digit(c) && num_ == Num::kInt) return next(Num::kInt);
      if (c == '.') return next(Num::kDot);
      if (c == 'e' || c == 'E') return next(Num::kExp);
      break;
    case Num::kDot:
      return is_digit(c) ? next(Num::kFrac) : Step::kError;
    case Num::kFrac:
      if (is_digit(c)) return next(Num::kFrac);
      if (c == 'e' || c == 'E') return next(Num::kExp);
      break;
    case Num::kExp:
      if (c == '+' || c == '-') return next(Num::kExpSign);
      return is_digit(c) ? next(Num::kExpDigits) : Step::kError;
    case Num::kExpSign:
      return is_digit(c) ? next(Num::kExpDigits) : Step::kError;
    case Num::kExpDigits:
      if (is_digit(c)) return next(Num::kExpDigits);
      break;
  }
  if (is_digit(c)) return Step::kError;  // a leading zero followed by a digit
  // The number ended before `c`: complete it, then let `c` continue the container.
  Step s = after_value();
  if (s == Step::kDone) return Step::kEnd;
  return feed(c);
}

JsonScanner::Step JsonScanner::feed(char c) {
  switch (state_) {
    case State::kDone:
      return Step::kEnd;
    case State::kString:
    case State::kEscape:
    case State::kUnicode: {
      ++fed_;  // counted first: a release point inside feed_string includes this byte
      Step s = feed_string(c);
      if (s == Step::kError) --fed_;
      return s;
    }
    case State::kNumber:
      return feed_number(c);
    case State::kLiteral: {
      if (c != *literal_rest_) return Step::kError;
      ++fed_;
      if (*++literal_rest_ != '\0') return Step::kMore;
      return after_value();
    }
    default:
      break;
  }
  if (is_ws(c)) {
    ++fed_;
    return Step::kMore;
  }
  return feed_structure(c);
}

// Between tokens: a value's start, a key, ':', ',' or a closing bracket.
JsonScanner::Step JsonScanner::feed_structure(char c) {
  Step s = Step::kError;
  switch (state_) {
    case State::kValue:
    case State::kValueOrClose:
      if (c == ']' && state_ == State::kValueOrClose) {
        ++fed_;
        stack_.pop_back();
        return after_value();
      }
      ++fed_;
      s = value_start(c);
      if (s == Step::kError) --fed_;
      return s;
    case State::kKeyOrClose:
    case State::kKey:
      if (c == '}' && state_ == State::kKeyOrClose) {
        ++fed_;
        stack_.pop_back();
        return after_value();
      }
      if (c != '"') return Step::kError;
      ++fed_;
      state_ = State::kString;
      string_is_key_ = true;
      return Step::kMore;
    case State::kColon:
      if (c != ':') return Step::kError;
      ++fed_;
      state_ = State::kValue;
      return Step::kMore;
    case State::kAfterValue:
      if (c == ',') {
        ++fed_;
        state_ = stack_.back() == '{' ? State::kKey : State::kValue;
        return Step::kMore;
      }
      if ((c == '}' && stack_.back() == '{') || (c == ']' && stack_.back() == '[')) {
        ++fed_;
        stack_.pop_back();
        return after_value();
      }
      return Step::kError;
    default:
      return Step::kError;
  }
}

bool JsonScanner::finish() {
  if (state_ == State::kNumber && stack_.empty() &&
      (num_ == Num::kZero || num_ == Num::kInt || num_ == Num::kFrac || num_ == Num::kExpDigits)) {
    after_value();
  }
  return state_ == State::kDone;
}

}  // namespace strata::chat
