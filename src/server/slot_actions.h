// llama-server's slot actions: POST /slots/{id}?action=save|restore with {"filename": NAME} (a plain
// file name inside --slot-save-path), and ?action=erase. The answer is llama-server's JSON
// (id_slot, filename, n_saved/n_written, n_restored/n_read, n_erased, timings) or an error object.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "server/request_fields.h"
#include "server/scheduler.h"

namespace strata::server {

// A slot file's name: 1 to 255 of [A-Za-z0-9._-], not starting with '.', so it stays inside the
// save directory. The error names the field.
std::optional<ApiError> check_slot_filename(const std::string& name);

struct SlotActionAnswer {
  int status = 200;
  nlohmann::json body;
};
SlotActionAnswer slot_action_answer(Scheduler& scheduler, const std::string& save_dir, int32_t id, const std::string& action,
                                    const std::string& body);

}  // namespace strata::server
