// A Jinja2 interpreter for the subset of the language that chat templates use (HF transformers
// dialect: trim_blocks and lstrip_blocks on, loop controls, `raise_exception`, `strftime_now`, a
// json.dumps-style `tojson`). Parse and render errors are values that name the line and column;
// hostile templates are stopped by the limits below, never by a crash, a hang or a huge allocation:
// every builtin charges steps for the work it does and bytes for what it builds (sizes are checked
// before anything is built).
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "jinja/lexer.h"
#include "jinja/value.h"

namespace strata::jinja {

struct Program;

struct Limits {
  size_t max_output = size_t{16} << 20;  // bytes of rendered text, and of any one string value
  int64_t max_steps = 5'000'000;         // statements + expressions evaluated, + builtin work (64 bytes
                                         // scanned, one element visited, one sort comparison: one step)
  int max_recursion = 400;               // nested evaluation (expressions, blocks, macro bodies)
  int max_call_depth = 64;               // nested macro calls
  int max_nesting = 128;                 // nesting of the template's own syntax (parse time)
  size_t max_list = 1'000'000;           // elements of one list (range(), list building)
  int max_value_depth = 128;             // nesting of lists/dicts (literals, JSON inputs)
  size_t max_memory = size_t{64} << 20;  // bytes of all strings/lists/dicts built during one render
};

struct RenderOptions {
  Limits limits;
  std::optional<std::time_t> now;  // strftime_now's clock; the current time when unset
};

// What one render used, also when it failed.
struct RenderStats {
  int64_t steps = 0;
  size_t memory = 0;           // bytes charged to max_memory
  bool limit_exceeded = false;  // the render was stopped by one of the Limits (not by the template's own error)
};

using Vars = std::vector<std::pair<std::string, Value>>;

class Template {
 public:
  static Result<Template> parse(std::string_view source, const SyntaxOptions& syntax = {},
                                int max_nesting = Limits{}.max_nesting);
  Result<std::string> render(const Vars& vars, const RenderOptions& options = {},
                             RenderStats* stats = nullptr) const;

 private:
  std::shared_ptr<const Program> program_;
};

// Parser entry point (jinja_parser.cpp).
Result<std::shared_ptr<const Program>> parse_program(std::string_view source, const SyntaxOptions& syntax,
                                                     int max_nesting);

}  // namespace strata::jinja
