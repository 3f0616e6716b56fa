// The interpreter's budgets: CPU steps and memory charged by every builtin, and the size checks that
// refuse a value before it is built. Also the string/list building operators that rely on them.
#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "jinja/interp.h"

namespace strata::jinja {

// ---- budgets ------------------------------------------------------------------------------------

Error Interp::limit_error(std::string message) {
  limit_exceeded_ = true;
  return Error{ErrorCode::kResourceExhausted, std::move(message)};
}

Status Interp::count_steps(int64_t n) {
  if (n > opt_.limits.max_steps - steps_) {
    steps_ = opt_.limits.max_steps + 1;
    return limit_error(fmt::format(
        "template exceeded the limit of {} evaluation steps (max_steps; endless or too large loop?)",
        opt_.limits.max_steps));
  }
  steps_ += n;
  return ok_status();
}

Status Interp::reserve_bytes(size_t bytes) {
  if (bytes > opt_.limits.max_memory - std::min(memory_, opt_.limits.max_memory)) {
    return limit_error(fmt::format(
        "template exceeded its memory budget of {} bytes (max_memory): {} bytes used, {} more needed",
        opt_.limits.max_memory, memory_, bytes));
  }
  memory_ += bytes;
  return ok_status();
}

Status Interp::check_string_size(size_t size) {
  if (size > opt_.limits.max_output) {
    return limit_error(fmt::format("would build a string of {} bytes, which exceeds the size limit of {} bytes "
                                   "(max_output)",
                                   size, opt_.limits.max_output));
  }
  return ok_status();
}

Status Interp::reserve_string(size_t size) {
  STRATA_TRY(check_string_size(size));
  STRATA_TRY(count_bytes(size));
  return reserve_bytes(kStringBytes + size);
}

Status Interp::reserve_list(size_t n) {
  if (n > opt_.limits.max_list) {
    return limit_error(fmt::format("list too long: would build a list of {} elements, over the limit of {} "
                                   "(max_list)",
                                   n, opt_.limits.max_list));
  }
  STRATA_TRY(count_steps(static_cast<int64_t>(n)));  // one step per element copied
  return reserve_bytes(kObjectBytes + n * kValueBytes);
}

Status Interp::reserve_strings(size_t n, size_t bytes) {
  size_t total = 0;
  if (__builtin_mul_overflow(n, kStringBytes, &total) || __builtin_add_overflow(total, bytes, &total)) {
    return reserve_bytes(SIZE_MAX);
  }
  STRATA_TRY(count_steps(static_cast<int64_t>(n + bytes / kBytesPerStep)));
  return reserve_bytes(total);
}

Result<Value> Interp::make_string(std::string s, bool reserved) {
  if (!reserved) STRATA_TRY(reserve_string(s.size()));
  return Value::string(std::move(s));
}

Result<Value> Interp::make_list(std::vector<Value> items, bool reserved) {
  if (!reserved) STRATA_TRY(reserve_list(items.size()));
  Value v = Value::list(std::move(items));
  if (v.depth() > opt_.limits.max_value_depth) {
    return limit_error(fmt::format("lists/dicts nested deeper than {} levels", opt_.limits.max_value_depth));
  }
  return v;
}

Result<Value> Interp::make_dict(std::vector<std::pair<std::string, Value>> items, bool reserved) {
  if (items.size() > opt_.limits.max_list) {
    return limit_error(
        fmt::format("dict of {} entries exceeds the limit of {} (max_list)", items.size(), opt_.limits.max_list));
  }
  if (!reserved) {
    size_t keys = 0;
    for (const auto& kv : items) keys += kv.first.size();
    STRATA_TRY(count_steps(static_cast<int64_t>(items.size() / 16 + keys / kBytesPerStep)));
    STRATA_TRY(reserve_bytes(kObjectBytes + items.size() * kEntryBytes + keys));
  }
  Value v = Value::dict(std::move(items));
  if (v.depth() > opt_.limits.max_value_depth) {
    return limit_error(fmt::format("lists/dicts nested deeper than {} levels", opt_.limits.max_value_depth));
  }
  return v;
}

Value Interp::make_namespace(std::vector<std::pair<std::string, Value>> items) {
  Value ns = Value::namespace_obj(std::move(items));
  namespaces_.push_back(ns);
  return ns;
}

// str(v) appended to `out`, refused before passing the string size limit or the memory budget.
Status Interp::convert(const Value& v, std::string& out) {
  const size_t start = out.size();
  const size_t room = std::min(opt_.limits.max_output,
                               opt_.limits.max_memory - std::min(memory_, opt_.limits.max_memory));
  size_t values = 0;
  const bool complete = str_into(v, out, start + room, &values);
  const size_t added = out.size() - start;
  STRATA_TRY(count_steps(static_cast<int64_t>(values)));
  if (!complete) {
    if (room < opt_.limits.max_output) return reserve_bytes(room + 1);
    return check_string_size(opt_.limits.max_output + 1);
  }
  STRATA_TRY(count_bytes(added));
  return reserve_bytes(added);
}

Result<std::string_view> Interp::text(const Value& v, std::string& holder) {
  if (v.is_string()) return std::string_view(v.str());
  holder.clear();
  STRATA_TRY(convert(v, holder));
  return std::string_view(holder);
}

Result<Value> Interp::stringify(const Value& v) {
  if (v.is_string()) return v;
  std::string s;
  STRATA_TRY(convert(v, s));
  STRATA_TRY(reserve_bytes(kStringBytes));
  return Value::string(std::move(s));
}

Result<bool> Interp::equal(const Value& a, const Value& b) {
  StepBudget work{opt_.limits.max_steps - steps_ + 1};
  const int64_t start = work.left;
  const bool r = equals(a, b, work);
  STRATA_TRY(count_steps(start - work.left));
  return r;
}

Result<int> Interp::order(const Value& a, const Value& b, bool prepaid) {
  StepBudget work{opt_.limits.max_steps - steps_ + 2};
  const int64_t start = work.left;
  auto r = compare(a, b, work);
  STRATA_TRY(count_steps(start - work.left - (prepaid ? 1 : 0)));
  return r;
}

Status Interp::emit(std::string& out, std::string_view text) {
  if (out.size() + text.size() > opt_.limits.max_output) {
    return limit_error(
        fmt::format("rendered text exceeds the output limit of {} bytes (max_output)", opt_.limits.max_output));
  }
  STRATA_TRY(reserve_bytes(text.size()));
  out.append(text);
  return ok_status();
}



Result<Value> Interp::concat(std::string_view x, std::string_view y) {
  STRATA_TRY(reserve_string(checked_add(x.size(), y.size())));
  std::string s;
  s.reserve(x.size() + y.size());
  s.append(x).append(y);
  return make_string(std::move(s), true);
}

Result<Value> Interp::repeat(const Value& seq, int64_t k) {
  const auto times = static_cast<size_t>(std::max<int64_t>(0, k));
  if (seq.is_string()) {
    const size_t size = checked_mul(seq.str().size(), times);
    STRATA_TRY(reserve_string(size));
    std::string s;
    s.reserve(size);
    for (size_t i = 0; i < times && !seq.str().empty(); ++i) s += seq.str();
    return make_string(std::move(s), true);
  }
  const size_t size = checked_mul(seq.items().size(), times);
  STRATA_TRY(reserve_list(size));
  std::vector<Value> items;
  items.reserve(size);
  for (size_t i = 0; i < times && !seq.items().empty(); ++i) {
    items.insert(items.end(), seq.items().begin(), seq.items().end());
  }
  return make_list(std::move(items), true);
}

}  // namespace strata::jinja
