// Chat templates selectable by name with --chat-template (written here in the style of each family's
// documented prompt format; not copies of the originals).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "text/chat_template.h"

namespace strata::server {

// The template of that name, or nothing when there is none.
std::optional<text::ChatTemplate> builtin_chat_template(std::string_view name);
// "chatml, qwen3, llama3": the names, for messages.
std::string builtin_chat_template_names();

}  // namespace strata::server
