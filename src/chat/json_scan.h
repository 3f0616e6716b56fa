// Incremental JSON syntax check, one byte at a time: whether the text so far can still become one
// valid JSON value, when that value is complete, and the last point at which the text could be
// closed into valid JSON by appending closers alone (used to stream a tool call's arguments and to
// close them if the call breaks off).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace strata::chat {

class JsonScanner {
 public:
  enum class Step {
    kMore,   // byte consumed; the value is not complete yet
    kDone,   // byte consumed and it completed the value (a closing bracket, quote or literal letter)
    kEnd,    // the value was already complete (a number ends here): byte NOT consumed
    kError,  // the byte cannot continue valid JSON (or the nesting is deeper than kMaxDepth)
  };
  static constexpr size_t kMaxDepth = 64;

  Step feed(char c);
  // Ends the input: a number at the very end completes the value. True when the value is complete.
  bool finish();
  bool complete() const { return state_ == State::kDone; }

  // Bytes fed up to the last release point, and what closes the text there into valid JSON.
  size_t release_size() const { return release_size_; }
  const std::string& release_closers() const { return release_closers_; }
  size_t size() const { return fed_; }

 private:
  enum class State {
    kValue, kValueOrClose,   // a value (kValueOrClose: just after '[')
    kKeyOrClose, kKey,       // a key (kKeyOrClose: just after '{')
    kColon, kAfterValue,     // ':' after a key; ',' or the closing bracket after a value
    kString, kEscape, kUnicode,
    kNumber, kLiteral, kDone,
  };
  enum class Num { kMinus, kZero, kInt, kDot, kFrac, kExp, kExpSign, kExpDigits };

  Step value_start(char c);
  Step after_value();  // a value ended: pop to the container's state
  Step feed_string(char c);
  Step feed_number(char c);
  Step feed_structure(char c);
  void mark_release(bool in_string);
  std::string closers() const;

  State state_ = State::kValue;
  std::vector<char> stack_;  // '{' or '['
  bool string_is_key_ = false;
  int unicode_left_ = 0;
  int utf8_left_ = 0;
  Num num_ = Num::kMinus;
  const char* literal_rest_ = nullptr;
  size_t fed_ = 0;
  size_t release_size_ = 0;
  std::string release_closers_;
};

}  // namespace strata::chat
