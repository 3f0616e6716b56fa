// The page at `/`: chat with the model and see the cluster. Plain HTML + JS, no build step.
#pragma once

#include <string>

namespace strata::server {

const std::string& web_ui_html();

}  // namespace strata::server
